"""``rlvr data filter``: keep the prompts whose measured pass rate meets a rule.

Klear-Reasoner (klear-reasoner-gppo.txt sec. 3.2.1, 5.2.4) samples 16 completions per prompt
from a strong model and keeps code prompts with "pass@16 > 0.5" (after dropping problems
with fewer than 16 tests) and math prompts where a majority of completions pass the
verifier. Both read as a pass rate over the 16 samples, the rule ``mean>0.5`` here
(``pass@16>0.5`` with ``n = 16`` keeps every prompt solved once: docs/data.md).
:func:`filter_file` does this with the machinery of ``rlvr eval``: prompts are sampled
``batch_size`` at a time by :func:`rlvr.evaluation.harness.evaluate` (the run's sampler,
chat template, forked and seeded RNG) and scored by the set's verifier; the rule is a
:class:`~rlvr.evaluation.keep_rule.KeepRule`.

Every scored prompt is appended, batch by batch, to ``<output stem>.passrates.jsonl`` (its
first line records the model, the sampling settings and the verifier with its options),
keyed by a hash of the prompt and reference it was scored on. Running the same command
again reads that file and samples only the batches holding a prompt not in it, so an
interrupted filter loses at most the batch in flight, and a row whose prompt or reference
changed is sampled again. Batch ``b`` is always sampled whole with seed ``seed + b`` (also
when a kill left part of it recorded), so a resumed run gives the same completions as an
uninterrupted one. Changing only ``--keep`` re-filters from the recorded scores without
sampling again; other changes (the verifier's options included) are refused, as is a file
written before records were keyed by content (delete the file to start over).

The kept rows are written unchanged but for one added field, ``filter``: ``{"model", "rule",
"n", "correct", "pass_rate", "score", "value"}`` (``value``: the rule's measure; an earlier
``filter`` moves to the list ``earlier_filters``); the dropped ones
go to ``<output stem>.dropped.jsonl`` with the reason (``rule`` or ``too_few_tests``).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rlvr.data.fields import FieldMap, field_map
from rlvr.data.loading import Example, Row, detected_map, row_to_example
from rlvr.data.rowfiles import StepReport, check_step_output, read_rows, write_step
from rlvr.dotted import flatten
from rlvr.evaluation.harness import EvalConfig, ProblemResult, Progress, evaluate
from rlvr.evaluation.keep_rule import KeepRule
from rlvr.generation import Sampler, make_sampler
from rlvr.rewards.registry import Verifier
from rlvr.rewards.scoring import Scorer


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
    sampler: str = "lean"
    """The sampler :func:`run_filter` makes when given none (recorded with the scores)."""
    sampler_options: dict[str, Any] = field(default_factory=dict)
    """Its options."""


def passrates_file(output: str | Path) -> Path:
    """Where the per-prompt scores of a filter writing ``output`` go."""
    output = Path(output).expanduser()
    return output.with_name(f"{output.stem}.passrates.jsonl")


@dataclass(frozen=True)
class FilterInput:
    """A filter's input rows, read and checked (and its recorded scores read) before any
    model loads."""

    rows: list[Row]
    """``(where, row)`` of every input row."""
    examples: list[Example]
    """Each row mapped by the job's fields."""
    keys: list[str]
    """Each row's record key: a hash of its prompt and reference (:func:`_key`)."""
    few: dict[int, int]
    """``{row index: test count}`` of the code problems dropped for too few tests."""
    settings: dict[str, Any]
    """What the scores depend on (:func:`_settings`)."""
    scores: dict[str, dict[str, Any]]
    """The scores already recorded, by key."""


def prepare_filter(
    source: str | Path, output: str | Path, job: FilterJob, verifier: Verifier
) -> FilterInput:
    """Check the outputs, read and map every row of ``source``, read the recorded scores: all
    that can fail on the user's input, before a model is loaded."""
    check_step_output(output, [source], also=[passrates_file(output)])
    rows, examples = read_input(source, job.fields)
    settings = _settings(job, verifier)
    return FilterInput(
        rows,
        examples,
        [_key(ex) for ex in examples],
        _too_few_tests(rows, examples, job.min_tests, verifier),
        settings,
        _read_scores(passrates_file(output), settings),
    )


def read_input(source: str | Path, fields: FieldMap | str) -> tuple[list[Row], list[Example]]:
    """Every row of ``source`` and the example it maps to under ``fields`` (the default one, on
    rows as ``rlvr data gen`` writes them: theirs, :func:`~rlvr.data.loading.detected_map`), as
    a filter reads its input (an empty file, a malformed row or a missing field: an error naming
    the row)."""
    rows = read_rows(source)
    _check_earlier(rows)
    mapping, name = detected_map(field_map(fields), rows[0][1]), Path(source).stem
    examples = [
        row_to_example(row, where, mapping, dataset=name, index=i)
        for i, (where, row) in enumerate(rows)
    ]
    return rows, examples


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
    prepared = prepare_filter(source, output, job, verifier)
    return run_filter(
        prepared,
        output,
        job,
        model=model,
        tokenizer=tokenizer,
        verifier=verifier,
        sampler=sampler,
        progress=progress,
    )


def run_filter(
    prepared: FilterInput,
    output: str | Path,
    job: FilterJob,
    *,
    model,
    tokenizer,
    verifier: Verifier,
    sampler: Sampler | None = None,
    progress: Progress | None = None,
) -> StepReport:
    """:func:`filter_file` on input already prepared by :func:`prepare_filter`; without
    ``sampler``, ``job.sampler`` is made for the call and released after it."""
    with contextlib.ExitStack() as stack:
        if sampler is None:
            sampler = make_sampler(job.sampler, model, tokenizer, **job.sampler_options)
            stack.callback(sampler.close)
        scorer = stack.enter_context(Scorer(verifier, job.config.scoring))

        def run(chunk: list[Example], seed: int) -> list[ProblemResult]:
            config = replace(job.config, seed=seed, keep_completions=False)
            report = evaluate(
                model, tokenizer, chunk, verifier, config, scorer=scorer, sampler=sampler
            )
            return report.problems

        _score_missing(prepared, run, passrates_file(output), job, progress)
    return _write(prepared, job.rule, output)


def _too_few_tests(
    rows: Sequence[Row], examples: Sequence[Example], least: int, verifier: Verifier
) -> dict[int, int]:
    """``{row index: test count}`` of the problems with fewer than ``least`` tests. Each row's
    tests are read when they are counted or when the verifier is ``code``; a row whose tests
    cannot be read (no outputs, not JSON, ...) is refused naming its file and line: with
    ``code`` every completion would score 0 as an error, and the rule would keep or drop the
    row as if it had been measured."""
    from rlvr.rewards.registry import parse_spec

    code = parse_spec(verifier.spec)[0] == "code"
    if least <= 0 and not code:
        return {}
    from rlvr.rewards.code import parse_reference

    counts = {}
    for i, ((where, _), ex) in enumerate(zip(rows, examples, strict=True)):
        try:
            counts[i] = len(parse_reference(ex.reference))
        except (TypeError, ValueError) as err:
            if code:
                raise ValueError(f"{where}: {err}") from None
            raise ValueError(
                f"{where}: --min-tests counts code tests, and this row's cannot be read ({err})"
            ) from None
    return {i: c for i, c in counts.items() if c < least}


def _settings(job: FilterJob, verifier: Verifier) -> dict[str, Any]:
    """What the recorded scores depend on (everything but the keep rule), as JSON would
    read it back."""
    config = asdict(job.config)
    config.pop("keep_completions")
    config.pop("ks")
    config["scoring"].pop("workers")  # how many score at once, not what they score
    settings = {"model": job.model, "verifier": verifier_settings(verifier), "config": config}
    if job.sampler != "lean" or job.sampler_options:  # absent for lean without options, as
        # in files written before samplers were chosen
        settings["sampler"] = {"name": job.sampler, "options": job.sampler_options}
    return json.loads(json.dumps(settings, default=str))


def verifier_settings(verifier: Verifier) -> dict[str, Any]:
    """The verifier's spec and every option it scores with, defaults included (so
    ``--extract strict`` and no ``--extract`` are the same); a ``+format`` wrapper's inner
    verifier is given the same way."""
    params = list(inspect.signature(verifier.fn).parameters.values())[2:]
    options = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    options.update(verifier.options)
    return {
        "spec": verifier.spec,
        "options": {
            name: verifier_settings(value) if isinstance(value, Verifier) else value
            for name, value in sorted(options.items())
        },
    }


def _read_scores(path: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The scores recorded in ``path`` by key, after checking they were sampled like this run.

    A missing or empty file holds none; a last line without its newline was cut off by a kill
    while it was written, and is ignored (:func:`_cut_partial_line` removes it before the
    next record is appended)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        lines.pop()
    if not lines:
        return {}
    try:
        head = json.loads(lines[0])
    except json.JSONDecodeError:
        raise ValueError(f"{path}:1: invalid JSON (a cut-off header): delete the file") from None
    if head.get("keys") != KEYS:
        raise ValueError(
            f"{path}: scores recorded by an earlier rlvr, keyed by row number and id rather "
            "than by the prompt and reference; delete the file to sample again"
        )
    _check_settings(path, head.get("settings"), settings)
    scores = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"{path}:{number}: invalid JSON") from None
        scores[record["key"]] = record
    return scores


def _check_settings(path: Path, recorded: Any, settings: dict[str, Any]) -> None:
    """Refuse scores recorded with other settings, naming the first that differs."""
    if recorded == settings:
        return
    old = flatten(recorded if isinstance(recorded, dict) else {"settings": recorded})
    new = flatten(settings)
    differs = (k for k in [*new, *old] if old.get(k, _MISSING) != new.get(k, _MISSING))
    name = next(differs, "settings")
    raise ValueError(
        f"{path}: scores recorded with other settings ({name}: {old.get(name)!r} there, "
        f"{new.get(name)!r} now); use the same model, -n, sampling and verifier options, or "
        "delete the file to start over"
    )


_MISSING = object()


def _cut_partial_line(path: Path) -> None:
    """Remove a last line left without its newline (a kill while it was written), so that the
    next record starts a line of its own rather than continuing the cut-off one."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r, default=str) + "\n" for r in records)
        handle.flush()
        os.fsync(handle.fileno())


KEYS = "sha256(prompt, reference)"
"""How records are keyed (written in the scores file's first line)."""


def _key(example: Example) -> str:
    """A record's key: a hash of the prompt and reference the prompt is scored on, so a row
    whose content changed is sampled again and an unchanged one (moved or not) is not."""
    content = json.dumps(
        [example.prompt, example.reference], sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def _score_missing(
    prepared: FilterInput,
    run: Callable[[list[Example], int], list[ProblemResult]],
    path: Path,
    job: FilterJob,
    progress: Progress | None,
) -> None:
    """Sample every batch holding a prompt not in ``prepared.scores``, recording each batch.

    A batch is sampled whole, with its seed, even when some of its prompts are recorded (a
    kill while the batch was written): the completions are those of an uninterrupted run."""
    examples, keys, scores = prepared.examples, prepared.keys, prepared.scores
    todo = [i for i in range(len(examples)) if i not in prepared.few]
    size, done = job.config.batch_size, sum(keys[i] in scores for i in todo)
    if progress:
        progress(done, len(todo))
    for batch, start in enumerate(range(0, len(todo), size)):
        members = todo[start : start + size]
        missing = sum(keys[i] not in scores for i in members)
        if not missing:
            continue
        results = run([examples[i] for i in members], job.config.seed + batch)
        records = [_record(keys[i], examples[i], p) for i, p in zip(members, results, strict=True)]
        _cut_partial_line(path)
        if not path.exists() or path.stat().st_size == 0:
            _append(path, [{"keys": KEYS, "settings": prepared.settings}])
        _append(path, records)
        scores.update((r["key"], r) for r in records)
        done += missing
        if progress:
            progress(done, len(todo))


def _record(key: str, example: Example, result: ProblemResult) -> dict[str, Any]:
    """One prompt's line in the scores file."""
    return {
        "key": key,
        "id": example.id,
        "n": result.n,
        "correct": result.c,
        "scores": result.scores,
        "status": result.status,
    }


EARLIER = "earlier_filters"
"""The field of a kept row holding the ``filter`` results of earlier filters, oldest first."""


def _with_earlier(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with a ``filter`` field it carries (an earlier filter's result) appended to its
    :data:`EARLIER` list, so the new result replaces none."""
    if "filter" not in row:
        return row
    return {**row, EARLIER: [*row.get(EARLIER, []), row["filter"]]}


def _check_earlier(rows: list[Row]) -> None:
    """Refuse a row whose :data:`EARLIER` field is not the list a filter writes there."""
    for where, row in rows:
        if not isinstance(row.get(EARLIER, []), list):
            raise ValueError(
                f"{where}: field {EARLIER!r} is {row[EARLIER]!r:.40}, not the list of earlier "
                "results a filter keeps there; rename the field"
            )


def _write(prepared: FilterInput, rule: KeepRule, output: str | Path) -> StepReport:
    kept, dropped, statuses = [], [], []
    for i, (where, row) in enumerate(prepared.rows):
        if i in prepared.few:
            dropped.append(
                {"reason": "too_few_tests", "tests": prepared.few[i], "where": where, "row": row}
            )
            continue
        record = prepared.scores[prepared.keys[i]]
        statuses += record.get("status", ())
        n, correct, score = record["n"], record["correct"], sum(record["scores"]) / record["n"]
        value = rule.measured(n, correct, score)
        stats = {
            "model": prepared.settings["model"],
            "rule": rule.text,
            "n": n,
            "correct": correct,
            "pass_rate": correct / n,
            "score": score,
            "value": value,
        }
        if rule.keeps(value):
            kept.append({**_with_earlier(row), "filter": stats})
        else:
            dropped.append({"reason": "rule", **stats, "where": where, "row": row})
    unverified = sum(status != "ok" for status in statuses)
    return replace(
        write_step(kept, dropped, output), unverified=unverified, completions=len(statuses)
    )
