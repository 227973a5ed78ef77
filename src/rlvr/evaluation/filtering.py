"""``rlvr data filter``: keep the prompts whose measured pass rate meets a rule.

Klear-Reasoner (klear-reasoner-gppo.txt sec. 2.2, 5.2.4) samples 16 completions per prompt
from a strong model and keeps code prompts with pass@16 > 0.5 (after dropping problems with
fewer than 16 tests) and math prompts where a majority of completions pass the verifier.
:func:`filter_file` does this with the machinery of ``rlvr eval``: prompts are sampled
``batch_size`` at a time by :func:`rlvr.evaluation.harness.evaluate` (the run's sampler,
chat template, forked and seeded RNG) and scored by the set's verifier; the rule is a
:class:`~rlvr.evaluation.keep_rule.KeepRule`.

Every scored prompt is appended, batch by batch, to ``<output stem>.passrates.jsonl`` (its
first line records the sampling settings). Running the same command again reads that
file and samples only the prompts not in it, so an interrupted filter loses at most the
batch in flight; batch ``b`` is always sampled with seed ``seed + b``, so a resumed run
gives the same completions as an uninterrupted one. Changing only ``--keep`` re-filters
from the recorded scores without sampling again; other changes are refused (delete the
file to start over).

The kept rows are written unchanged but for one added field, ``filter``: ``{"n",
"correct", "pass_rate", "score", "value"}`` (``value``: the rule's measure); the dropped ones
go to ``<output stem>.dropped.jsonl`` with the reason (``rule`` or ``too_few_tests``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rlvr.data.fields import FieldMap, field_map
from rlvr.data.loading import Example, Row, row_to_example
from rlvr.data.rowfiles import StepReport, read_rows, write_step
from rlvr.evaluation.harness import EvalConfig, ProblemResult, evaluate
from rlvr.evaluation.keep_rule import KeepRule
from rlvr.generation import Sampler
from rlvr.rewards.registry import Verifier
from rlvr.rewards.scoring import Scorer

Progress = Callable[[int, int], None]
"""``progress(done, total)``: prompts scored so far (resumed ones included) of all."""


@dataclass(frozen=True)
class FilterJob:
    """What a filter samples with and keeps."""

    rule: KeepRule
    """The keep rule."""
    config: EvalConfig
    """Samples per prompt (``n``), sampling, batch size, seed, verifier limits."""
    fields: FieldMap | str = "default"
    """Field mapping of the input rows (``code_tasks``, ``reasoning_gym``, ...)."""
    min_tests: int = 0
    """Drop code problems with fewer tests than this before sampling (0: keep all)."""
    model: str = ""
    """Model name, recorded with the scores (a resume with another model is refused)."""


def passrates_file(output: str | Path) -> Path:
    """Where the per-prompt scores of a filter writing ``output`` go."""
    output = Path(output).expanduser()
    return output.with_name(f"{output.stem}.passrates.jsonl")


def filter_file(
    source: str | Path,
    output: str | Path,
    job: FilterJob,
    *,
    model,
    tokenizer,
    verifier: Verifier,
    sampler: Sampler | None = None,
    progress: Progress | None = None,
) -> StepReport:
    """Sample and score every prompt of ``source`` (resuming), keep those meeting ``job.rule``."""
    rows = read_rows(source)
    mapping, name = field_map(job.fields), Path(source).stem
    examples = [
        row_to_example(row, where, mapping, dataset=name, index=i)
        for i, (where, row) in enumerate(rows)
    ]
    few = _too_few_tests(examples, job.min_tests)
    todo = [i for i in range(len(rows)) if i not in few]
    scores = _read_scores(passrates_file(output), _settings(job, verifier))
    with Scorer(verifier, job.config.scoring) as scorer:

        def run(chunk: list[Example], seed: int) -> list[ProblemResult]:
            config = replace(job.config, seed=seed, keep_completions=False)
            report = evaluate(
                model, tokenizer, chunk, verifier, config, scorer=scorer, sampler=sampler
            )
            return report.problems

        _score_missing(examples, todo, scores, run, passrates_file(output), job, progress)
    keys = [_key(i, ex) for i, ex in enumerate(examples)]
    return _write(rows, keys, few, scores, job.rule, output)


def _too_few_tests(examples: Sequence[Example], least: int) -> dict[int, int]:
    """``{row index: test count}`` of the problems with fewer than ``least`` tests."""
    if least <= 0:
        return {}
    from rlvr.rewards.code import parse_reference

    counts = {}
    for i, ex in enumerate(examples):
        try:
            counts[i] = len(parse_reference(ex.reference))
        except (TypeError, ValueError) as err:
            raise ValueError(f"--min-tests: {ex.id}: cannot count its tests ({err})") from None
    return {i: c for i, c in counts.items() if c < least}


def _settings(job: FilterJob, verifier: Verifier) -> dict[str, Any]:
    """What the recorded scores depend on (everything but the keep rule)."""
    config = asdict(job.config)
    config.pop("keep_completions")
    config.pop("ks")
    return {"model": job.model, "verifier": verifier.spec, "config": config}


def _read_scores(path: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The scores recorded in ``path`` by key, after checking they were sampled like this run.

    A missing file starts one; a cut-off last line (a kill while writing) is ignored."""
    if not path.exists():
        _append(path, [{"settings": settings}])
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0]) if lines else {}
    if json.loads(json.dumps(settings, default=str)) != head.get("settings"):
        raise ValueError(
            f"{path}: scores recorded with other settings ({head.get('settings')}); "
            "use the same model, -n, sampling and verifier, or delete the file to start over"
        )
    scores = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: invalid JSON") from None
        scores[record["key"]] = record
    return scores


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, default=str) + "\n" for r in records)
        handle.flush()
        os.fsync(handle.fileno())


def _key(index: int, example: Example) -> str:
    return f"{index}:{example.id}"


def _score_missing(
    examples: Sequence[Example],
    todo: list[int],
    scores: dict[str, dict[str, Any]],
    run: Callable[[list[Example], int], list[ProblemResult]],
    path: Path,
    job: FilterJob,
    progress: Progress | None,
) -> None:
    """Sample the prompts of ``todo`` not in ``scores``, batch by batch, recording each batch."""
    size = job.config.batch_size
    done = sum(_key(i, examples[i]) in scores for i in todo)
    if progress:
        progress(done, len(todo))
    for batch, start in enumerate(range(0, len(todo), size)):
        pending = [i for i in todo[start : start + size] if _key(i, examples[i]) not in scores]
        if not pending:
            continue
        results = run([examples[i] for i in pending], job.config.seed + batch)
        records = [
            {
                "key": _key(i, examples[i]),
                "n": p.n,
                "correct": p.c,
                "scores": p.scores,
                "status": p.status,
            }
            for i, p in zip(pending, results, strict=True)
        ]
        _append(path, records)
        scores.update((r["key"], r) for r in records)
        done += len(pending)
        if progress:
            progress(done, len(todo))


def _write(
    rows: list[Row],
    keys: list[str],
    few: dict[int, int],
    scores: dict[str, dict[str, Any]],
    rule: KeepRule,
    output: str | Path,
) -> StepReport:
    kept, dropped = [], []
    for i, (where, row) in enumerate(rows):
        if i in few:
            dropped.append({"reason": "too_few_tests", "tests": few[i], "where": where, "row": row})
            continue
        record = scores[keys[i]]
        n, correct, score = record["n"], record["correct"], sum(record["scores"]) / record["n"]
        value = rule.measured(n, correct, score)
        stats = {
            "n": n,
            "correct": correct,
            "pass_rate": correct / n,
            "score": score,
            "value": value,
        }
        if rule.keeps(value):
            kept.append({**row, "filter": stats})
        else:
            dropped.append(
                {"reason": "rule", "rule": rule.text, **stats, "where": where, "row": row}
            )
    return write_step(kept, dropped, output)
