"""Evaluation: sample ``n`` completions per problem, verify them, report avg@k / pass@k / maj@k.

:func:`evaluate` is shared by ``rlvr eval`` and the trainer's periodic held-out
evaluation. Sampling goes through :func:`rlvr.generation.generate` (the trainer's own
sampler) under a forked torch RNG seeded from ``EvalConfig.seed``, so an evaluation is
reproducible and leaves the caller's RNG stream, and the model's train/eval mode, as they
were. A completion counts as correct when its score reaches the verifier's
``correct_value`` (``1.0``: all tests passed for the soft code reward).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import torch

from rlvr.data.chat import format_prompt, has_chat_template
from rlvr.data.loading import Example
from rlvr.evaluation.diversity import Diversity, diversity, mean_diversity
from rlvr.evaluation.grouping import merge_wrong_votes
from rlvr.evaluation.majority import answer_keys, majority_summary, majority_values
from rlvr.evaluation.metrics import standard_errors, summarize
from rlvr.evaluation.partial import PartialSamples, rng_state, set_rng_state
from rlvr.generation import Sampler, SamplingConfig, make_sampler
from rlvr.models import context_length
from rlvr.rewards.registry import Verifier, get_verifier
from rlvr.rewards.scoring import Scorer, Scores, ScoringConfig
from rlvr.seeds import check_seed

EVAL_SAMPLING = SamplingConfig(max_new_tokens=256, temperature=0.6, top_p=1.0)


Progress = Callable[[int, int], None]
"""``progress(done, total)``: prompts done so far (resumed ones included) of all."""


def progress_lines(say: Callable[[str], None], title: str, unit: str = "prompts") -> Progress:
    """A :data:`Progress` that says ``title: done/total unit`` when ``done`` reaches another
    tenth of ``total`` (nothing at the start): progress in a log, where a bar cannot draw.

    >>> progress = progress_lines(print, "eval", "problems")
    >>> for done in (0, 3, 10, 11, 20):
    ...     progress(done, 20)
    eval: 3/20 problems
    eval: 10/20 problems
    eval: 20/20 problems
    """
    said = {0}

    def progress(done: int, total: int) -> None:
        tenth = 10 * done // max(total, 1)
        if tenth not in said:
            said.add(tenth)
            say(f"{title}: {done}/{total} {unit}")

    return progress


@dataclass(frozen=True)
class EvalConfig:
    """How an evaluation samples and scores."""

    n: int = 4
    """Completions sampled per problem."""
    ks: tuple[int, ...] = (1, 4)
    """The k of avg@k / pass@k / maj@k (each <= n)."""
    sampling: SamplingConfig = EVAL_SAMPLING
    """Temperature, top-p and max new tokens (APMPO evaluates at temperature 0.6)."""
    batch_size: int = 8
    """Problems per ``generate`` call (``batch_size * n`` sequences at once)."""
    seed: int = 0
    """Seed of the sampling RNG (forked: the caller's RNG is left untouched)."""
    system_prompt: str | None = None
    """System message put before every prompt (replaces one in the data)."""
    scoring: ScoringConfig = ScoringConfig()
    """Verifier time limit and worker processes."""
    keep_completions: bool = True
    """Keep completion texts in the report (for the JSON output)."""

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.ks or any(not 1 <= k <= self.n for k in self.ks):
            raise ValueError(f"every k must be in [1, n={self.n}], got ks={self.ks}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        check_seed("seed", self.seed)
        if self.n > 1 and self.sampling.temperature == 0:
            warnings.warn(
                f"{self.n} samples per problem at temperature 0 are one greedy completion "
                f"repeated: pass@k equals avg@k (sample with a temperature, or use n=1)",
                stacklevel=3,
            )


@dataclass
class ProblemResult:
    """The ``n`` completions of one problem and their scores."""

    id: str
    dataset: str
    prompt: Any
    """The example's prompt (before the chat template)."""
    reference: Any
    scores: list[float]
    correct: list[bool]
    lengths: list[int]
    """Completion lengths in tokens."""
    truncated: list[bool]
    status: list[str]
    """Verifier status per completion: ``ok``, ``error`` or ``timeout``."""
    completions: list[str] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    """The verifier's error message per completion (``None`` where it ran)."""
    diversity: Diversity | None = None
    """distinct-1/2 and self-BLEU of the ``n`` completions (:mod:`rlvr.evaluation.diversity`)."""
    answers: list[str | None] = field(default_factory=list)
    """Each completion's vote in maj@k: its answer key, or for a wrong answer the key of the
    leading (largest) wrong answer the verifier judged equal to it (``None``: no answer); empty
    when the verifier gives no keys (``code``): :mod:`rlvr.evaluation.grouping`."""

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def c(self) -> int:
        return sum(self.correct)


@dataclass
class EvalReport:
    """Metrics overall and per dataset, with every problem's results."""

    metrics: dict[str, float]
    """``avg@k``, ``pass@k``, ``maj@k`` (each k, ``maj@k`` where the verifier gives answer keys;
    and ``avg@n``), ``score/mean``, ``response/length_mean``,
    ``response/clipped_frac``, ``verifier/failures``, ``verifier/timeouts``, ``num_problems``,
    ``diversity/distinct_1``, ``diversity/distinct_2``, ``diversity/self_bleu`` (``n >= 2``)."""
    per_dataset: dict[str, dict[str, float]]
    """The same metrics for each dataset name."""
    problems: list[ProblemResult]
    config: EvalConfig
    stderr: dict[str, float] = field(default_factory=dict)
    """Standard error over problems of each ``avg@k`` / ``pass@k`` / ``maj@k`` in ``metrics``
    (:func:`rlvr.evaluation.metrics.standard_errors`; NaN for one problem)."""
    per_dataset_stderr: dict[str, dict[str, float]] = field(default_factory=dict)
    """The same for each dataset name."""
    prompts: dict[str, Any] | None = None
    """The prompts as sampled (:func:`prompts_record`); ``None`` when not known."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``rlvr eval --output`` writes)."""
        problems = [
            {**asdict(p), "n": p.n, "c": p.c, "diversity": p.diversity and p.diversity._asdict()}
            for p in self.problems
        ]
        return {
            "metrics": self.metrics,
            "per_dataset": self.per_dataset,
            "stderr": json_numbers(self.stderr),
            "per_dataset_stderr": {
                name: json_numbers(se) for name, se in self.per_dataset_stderr.items()
            },
            "config": asdict(self.config),
            **({} if self.prompts is None else {"prompts": self.prompts}),
            "problems": problems,
        }


def report_document(
    report: EvalReport,
    *,
    model: str,
    data: Any,
    verifier: str,
    verifier_options: dict[str, Any],
    **about: Any,
) -> dict[str, Any]:
    """The JSON report of an evaluation, as ``rlvr eval`` writes it and a run writes each of its
    held-out evaluations (``<run>/eval_reports/``): what was evaluated (``model``, ``data``), the
    verifier spec and the options it was built with (which
    :func:`~rlvr.evaluation.paired.paired_differences` checks before pairing two reports),
    ``about`` (how it was loaded, sampled, run), then :meth:`EvalReport.to_dict`."""
    head = {
        "model": model,
        "data": data,
        "verifier": verifier,
        "verifier_options": verifier_options,
    }
    return {**head, **about, **report.to_dict()}


def prompts_record(
    tokenizer, examples: Sequence[Example], prompt_ids: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """The prompts as the model was given them, for a report: whether the tokenizer has a
    chat template, and ``token_ids_sha256``, sha256 of each problem's (dataset, id) and prompt
    token ids in (dataset, id) order, which changes with anything that changes a prompt (system
    prompt, template, chat template, tokenizer, prompt field, a run's prompt length limit)."""
    rows = sorted(
        [ex.dataset, ex.id, [int(t) for t in ids]]
        for ex, ids in zip(examples, prompt_ids, strict=True)
    )
    digest = hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
    return {"chat_template": has_chat_template(tokenizer), "token_ids_sha256": digest}


def json_numbers(values: dict[str, float]) -> dict[str, float | None]:
    """NaN (no standard error from one problem, no interval over one) as ``None``: ``null`` in
    JSON, not ``NaN``, which JSON readers refuse."""
    return {k: None if math.isnan(v) else v for k, v in values.items()}


Votes = dict[int, dict[str, float]]
"""``id(problem)`` -> its ``maj@k`` values (:func:`_votes`)."""


def _votes(problems: Sequence[ProblemResult], ks: Sequence[int]) -> Votes:
    """Each problem's ``maj@k`` for each ``k``, computed once; empty unless every problem has
    its completions' answer keys (the verifier gives them)."""
    if not all(len(p.answers) == p.n for p in problems):
        return {}
    values = majority_values([(p.answers, p.correct) for p in problems], ks)
    return {id(p): {name: v[i] for name, v in values.items()} for i, p in enumerate(problems)}


def _with_majority(
    problems: Sequence[ProblemResult], votes: Votes, base: dict[str, float], means: bool
) -> dict[str, float]:
    """``base`` (avg@k / pass@k, or their standard errors) with each ``maj@k`` after its
    ``pass@k``: the mean over ``problems``, or (``means`` False) its standard error."""
    if not votes:
        return base
    names = votes[id(problems[0])]
    mean, stderr = majority_summary({n: [votes[id(p)][n] for p in problems] for n in names})
    extra = mean if means else stderr
    out: dict[str, float] = {}
    for key, value in base.items():
        out[key] = value
        majority = key.replace("pass@", "maj@", 1)
        if key.startswith("pass@") and majority in extra:
            out[majority] = extra[majority]
    return out | extra


def _metrics(
    problems: Sequence[ProblemResult], ks: Sequence[int], votes: Votes
) -> dict[str, float]:
    scores = [s for p in problems for s in p.scores]
    lengths = [x for p in problems for x in p.lengths]
    status = [s for p in problems for s in p.status]
    out = _with_majority(problems, votes, summarize([(p.n, p.c) for p in problems], ks), True)
    out.update(
        {
            "score/mean": sum(scores) / len(scores),
            "response/length_mean": sum(lengths) / len(lengths),
            "response/clipped_frac": sum(t for p in problems for t in p.truncated) / len(lengths),
            "verifier/failures": float(status.count("error")),
            "verifier/timeouts": float(status.count("timeout")),
            "num_problems": float(len(problems)),
        }
    )
    out.update(mean_diversity([p.diversity for p in problems if p.diversity is not None]))
    return out


def build_report(problems: list[ProblemResult], config: EvalConfig) -> EvalReport:
    """Overall and per-dataset metrics of scored problems."""
    if not problems:
        raise ValueError("no problems to report on")
    groups: dict[str, list[ProblemResult]] = defaultdict(list)
    for problem in problems:
        groups[problem.dataset].append(problem)
    votes = _votes(problems, config.ks)
    per_dataset = {name: _metrics(group, config.ks, votes) for name, group in groups.items()}
    return EvalReport(
        _metrics(problems, config.ks, votes),
        per_dataset,
        problems,
        config,
        stderr=_stderr(problems, config.ks, votes),
        per_dataset_stderr={
            name: _stderr(group, config.ks, votes) for name, group in groups.items()
        },
    )


def _stderr(problems: Sequence[ProblemResult], ks: Sequence[int], votes: Votes) -> dict[str, float]:
    base = standard_errors([(p.n, p.c) for p in problems], ks)
    return _with_majority(problems, votes, base, False)


class Samples(NamedTuple):
    """``N = problems * n`` completions, grouped by problem."""

    texts: list[str]
    lengths: list[int]
    """Completion lengths in tokens (EOS included)."""
    truncated: list[bool]
    """Hit ``max_new_tokens`` without an EOS."""


def encode_prompts(tokenizer, examples: Sequence[Example], config: EvalConfig) -> list[list[int]]:
    """Token ids of each example's prompt, chat template (and ``config.system_prompt``) applied."""
    texts = [format_prompt(tokenizer, ex.prompt, config.system_prompt) for ex in examples]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def warn_past_context(model, prompt_ids: Sequence[Sequence[int]], budget: int) -> None:
    """One warning when prompts plus ``budget`` new tokens pass the model's context: their
    completions are sampled at positions the model was not trained on (the trainer fits its
    prompts to the context instead, ``data.max_prompt_tokens``)."""
    context = context_length(model)
    over = [len(ids) for ids in prompt_ids if context and len(ids) + budget > context]
    if over:
        warnings.warn(
            f"{len(over)} of {len(prompt_ids)} prompts (the longest {max(over)} tokens) plus "
            f"max_new_tokens={budget} pass the model's context of {context} tokens: their "
            "completions run past it",
            stacklevel=3,
        )


def warn_repeated_problems(examples: Sequence[Example]) -> None:
    """One warning when examples repeat the dataset and id of an earlier one: each is sampled
    and averaged as a problem of its own (a row given twice counts twice in avg@k, pass@k and
    their standard errors), and a report of them cannot be paired by problem (``--against``)."""
    seen: set[tuple[str, str]] = set()
    repeated = []
    for ex in examples:
        key = (ex.dataset, ex.id)
        if key in seen:
            repeated.append(key)
        seen.add(key)
    if repeated:
        warnings.warn(
            f"{len(repeated)} of {len(examples)} problems repeat the dataset and id of an earlier "
            f"one (first: {'/'.join(repeated[0])}): each is evaluated and averaged as a problem "
            "of its own (a row given twice counts twice in avg@k, pass@k and their standard "
            "errors), and rlvr eval --against cannot pair such a report problem by problem",
            stacklevel=2,
        )


def sample(
    sampler: Sampler,
    prompt_ids: Sequence[Sequence[int]],
    config: EvalConfig,
    *,
    done: Samples | None = None,
    on_batch: Callable[[Samples], None] | None = None,
    progress: Progress | None = None,
) -> Samples:
    """``config.n`` completions per prompt, ``config.batch_size`` prompts at a time, after the
    whole batches ``done`` already holds; ``on_batch`` sees the samples after each batch,
    ``progress(prompts sampled, prompts)`` is told before the first and after each."""
    texts, lengths, truncated = (list(x) for x in (done or Samples([], [], [])))
    first = len(texts) // config.n
    if progress is not None:
        progress(first, len(prompt_ids))
    for start in range(first, len(prompt_ids), config.batch_size):
        ids = [list(p) for p in prompt_ids[start : start + config.batch_size]]
        out = sampler.generate(ids, n=config.n, sampling=config.sampling)
        texts += out.texts
        lengths += [int(x) for x in out.response_lengths.tolist()]
        truncated += [bool(x) for x in out.truncated.tolist()]
        if on_batch is not None:
            on_batch(Samples(texts, lengths, truncated))
        if progress is not None:
            progress(start + len(ids), len(prompt_ids))
    return Samples(texts, lengths, truncated)


def _rng_devices(model) -> list[int]:
    device = next(model.parameters()).device
    return [device.index or 0] if device.type == "cuda" else []


def sample_seeded(
    model,
    tokenizer,
    prompt_ids: Sequence[Sequence[int]],
    config: EvalConfig,
    sampler: Sampler | None = None,
    keep: PartialSamples | None = None,
    progress: Progress | None = None,
) -> Samples:
    """:func:`sample` in eval mode under a forked RNG seeded with ``config.seed``.

    ``sampler``: the one to sample with (the trainer's); default the ``lean`` sampler on ``model``.
    ``keep``: where the samples so far and the RNG state after them are kept after each batch,
    and taken up from when a killed evaluation is run again (the numbers are unchanged).
    ``progress``: see :func:`sample`.
    """
    sampler = sampler or make_sampler("lean", model, tokenizer)
    devices = _rng_devices(model)
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(config.seed)
            done = _resume(keep, devices)
            on_batch = None if keep is None else functools.partial(_keep, keep, devices)
            return sample(
                sampler, prompt_ids, config, done=done, on_batch=on_batch, progress=progress
            )
    finally:
        model.train(was_training)


def _resume(keep: PartialSamples | None, devices: list[int]) -> Samples | None:
    """The samples ``keep`` holds, with the RNG set to its state after them (None: none)."""
    saved = keep.load() if keep is not None else None
    if saved is None:
        return None
    set_rng_state(saved[1], devices)
    return Samples(**saved[0])


def _keep(keep: PartialSamples, devices: list[int], samples: Samples) -> None:
    keep.save(samples._asdict(), rng_state(devices))


def _check_range(values: Sequence[float], verifier: Verifier) -> None:
    """Refuse a score outside the verifier's range: above its correct score it would count as
    correct in avg@k and pass@k, below its lowest it would skew ``score/mean``."""
    (low, high), tol = verifier.score_range, 1e-9
    bad = next((v for v in values if not low - tol <= v <= high + tol), None)
    if bad is not None:
        raise ValueError(
            f"verifier {verifier.spec!r} scored a completion {bad:g}, outside [{low:g}, {high:g}] "
            "(its wrong to correct score; a function without options correct and wrong scores "
            "0 to 1)"
        )


def score_problems(
    examples: Sequence[Example],
    verifier: Verifier,
    samples: Samples,
    config: EvalConfig,
    scorer: Callable[[Sequence[str], Sequence[Any]], Scores] | None = None,
) -> list[ProblemResult]:
    """Verify ``samples`` (``config.n`` per example, in order) into per-problem results."""
    references = [ex.reference for ex in examples for _ in range(config.n)]
    if scorer is None:
        with Scorer(verifier, config.scoring) as own:
            scores = own(samples.texts, references)
    else:
        scores = scorer(samples.texts, references)
    _check_range(scores.values, verifier)
    keys = answer_keys(verifier, samples.texts, references) if verifier.votes else []
    problems = []
    for i, ex in enumerate(examples):
        rows = slice(i * config.n, (i + 1) * config.n)
        values = scores.values[rows]
        correct = [v >= verifier.correct_value - 1e-9 for v in values]
        votes = (
            merge_wrong_votes(verifier, samples.texts[rows], keys[rows], correct) if keys else []
        )
        problems.append(
            ProblemResult(
                id=ex.id,
                dataset=ex.dataset,
                prompt=ex.prompt,
                reference=ex.reference,
                scores=values,
                correct=correct,
                lengths=samples.lengths[rows],
                truncated=samples.truncated[rows],
                status=scores.status[rows],
                completions=samples.texts[rows] if config.keep_completions else [],
                errors=scores.errors[rows] if scores.errors else [None] * config.n,
                diversity=diversity(samples.texts[rows]),
                answers=votes,
            )
        )
    return problems


def evaluate(
    model,
    tokenizer,
    examples: Sequence[Example],
    verifier: Verifier | str,
    config: EvalConfig = EvalConfig(),
    *,
    scorer: Callable[[Sequence[str], Sequence[Any]], Scores] | None = None,
    sampler: Sampler | None = None,
    prompt_ids: Sequence[Sequence[int]] | None = None,
    keep: PartialSamples | None = None,
    progress: Progress | None = None,
) -> EvalReport:
    """Sample ``config.n`` completions per example, verify them, and report.

    ``scorer`` reuses an open :class:`rlvr.rewards.Scorer` (the trainer's, with its worker
    processes); by default one is made from ``config.scoring`` for this call. ``sampler``
    reuses the trainer's sampler (so training reward and evaluation score come from the
    same one); by default the ``lean`` sampler on ``model``. ``prompt_ids``: the examples'
    prompts already tokenised (the trainer's, cut to ``data.max_prompt_tokens``); by
    default each prompt is formatted with the chat template and tokenised here. ``keep``:
    see :func:`sample_seeded` (``rlvr eval`` continues a killed evaluation with it).
    ``progress(prompts sampled, prompts)``: told before sampling and after each batch.
    """
    if not examples:
        raise ValueError("examples is empty")
    if prompt_ids is not None and len(prompt_ids) != len(examples):
        raise ValueError(f"{len(prompt_ids)} prompt_ids for {len(examples)} examples")
    verifier = get_verifier(verifier)
    if verifier.correct_value <= verifier.failure_value:
        raise ValueError(
            f"the verifier's correct score ({verifier.correct_value}) must exceed its wrong score "
            f"({verifier.failure_value}); otherwise every wrong completion counts as correct"
        )
    if prompt_ids is None:
        prompt_ids = encode_prompts(tokenizer, examples, config)
        warn_past_context(model, prompt_ids, config.sampling.max_new_tokens)
    samples = sample_seeded(model, tokenizer, prompt_ids, config, sampler, keep, progress)
    report = build_report(score_problems(examples, verifier, samples, config, scorer), config)
    report.prompts = prompts_record(tokenizer, examples, prompt_ids)
    return report
