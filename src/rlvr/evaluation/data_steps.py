"""Data-cleaning steps by name, with typed options: what a pipeline's ``kind: data`` stage runs.

=============  ==================================================  ===============================
step           options (``key=value``; defaults)                   does
=============  ==================================================  ===============================
dedup          ``field``                                           :func:`rlvr.data.dedup.dedup_file`
decontaminate  ``against`` (list, required), ``ngram=9``,          :func:`rlvr.data.contamination.decontaminate_file`
               ``common=0``, ``field``, ``split=test``
filter         ``keep`` (required), ``n=16``, ``fields``,          :func:`rlvr.evaluation.filtering.filter_file`
               ``prompt_field``, ``answer_field``,
               ``verifier=math``, ``min_tests=0``,
               ``max_tokens=256``, ``temperature=0.6``,
               ``top_p=1.0``, ``batch_size=8``, ``seed=0``,
               ``system_prompt``, ``timeout=10``, ``workers=1``
=============  ==================================================  ===============================

The options mirror the flags of ``rlvr data dedup / decontaminate / filter``. The steps live
here, beside the evaluation harness, because ``filter`` samples with it; ``dedup`` and
``decontaminate`` need only :mod:`rlvr.data`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.fields import FieldMap, field_map
from rlvr.data.rowfiles import StepReport
from rlvr.evaluation.filtering import Progress
from rlvr.evaluation.keep_rule import parse_rule


@dataclass(frozen=True)
class DedupOptions:
    """``dedup``: exact duplicates of the normalised prompt."""

    field: str | None = None
    """Prompt field or field mapping (``None``: prompt, question, problem, text)."""


@dataclass(frozen=True)
class DecontaminateOptions:
    """``decontaminate``: prompts sharing an n-gram with an evaluation set."""

    against: tuple[str, ...] = ()
    """Evaluation sets (named, files with optional ``::FIELD``, ``reasoning_gym:<task>``)."""
    ngram: int = 9
    """n-gram length (Klear: 9)."""
    common: int = 0
    """Ignore n-grams found in at least this many evaluation problems (0: none ignored)."""
    field: str | None = None
    """Prompt field or field mapping of the input."""
    split: str = "test"
    """Split of the sets that are dataset directories or hub names (named sets: their own)."""

    def __post_init__(self) -> None:
        if not self.against:
            raise ValueError("decontaminate needs against=[SET, ...]")


@dataclass(frozen=True)
class FilterOptions:
    """``filter``: keep prompts whose pass rate under the stage's model meets ``keep``."""

    keep: str = ""
    """Keep rule, e.g. ``mean>0.5`` (Klear's), ``0<mean<1``, ``pass@4>0.5``."""
    n: int = 16
    """Completions per prompt."""
    fields: str | None = None
    """Field mapping of the input (``code_tasks``, ``reasoning_gym``, ...; ``None``: the
    ``prompt_field`` / ``answer_field`` given, else ``default``)."""
    prompt_field: str | None = None
    """The input's prompt field, instead of ``fields`` (default ``prompt``)."""
    answer_field: str | None = None
    """The input's answer field, instead of ``fields`` (default ``answer``)."""
    verifier: str = "math"
    """Verifier spec."""
    min_tests: int = 0
    """Drop code problems with fewer tests (Klear: 16)."""
    max_tokens: int = 256
    """Completion budget."""
    temperature: float = 0.6
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus mass."""
    batch_size: int = 8
    """Prompts per generation call."""
    seed: int = 0
    """Sampling seed (batch ``b`` samples with ``seed + b``)."""
    system_prompt: str | None = None
    """System message before every prompt."""
    timeout: float = 10.0
    """Verifier limit per completion, seconds."""
    workers: int = 1
    """Verifier worker processes."""

    def __post_init__(self) -> None:
        if not self.keep:
            raise ValueError("filter needs keep=RULE (e.g. 'mean>0.5')")
        parse_rule(self.keep, self.n)  # a bad rule is refused before any model loads
        self.field_map()

    def field_map(self) -> FieldMap:
        """The input's field mapping: ``fields``, or the one ``prompt_field`` /
        ``answer_field`` name (an unknown mapping or both ways at once are refused)."""
        if self.prompt_field is None and self.answer_field is None:
            return field_map(self.fields)
        if self.fields is not None:
            raise ValueError("give --fields or --prompt-field / --answer-field, not both")
        return FieldMap(prompt=self.prompt_field or "prompt", answer=self.answer_field or "answer")


STEPS: dict[str, type] = {
    "dedup": DedupOptions,
    "decontaminate": DecontaminateOptions,
    "filter": FilterOptions,
}
"""Step name -> its options class."""


def step_options(step: str, options: dict[str, Any]) -> Any:
    """The step's typed options; an unknown step or option names the valid ones."""
    if step not in STEPS:
        raise ValueError(f"unknown data step {step!r}; valid: {', '.join(STEPS)}")
    cls = STEPS[step]
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"{step}: unknown option(s) {unknown}; valid: {', '.join(valid)}")
    if "against" in options:
        against = options["against"]
        options = {**options, "against": tuple([against] if isinstance(against, str) else against)}
    return cls(**options)


def run_step(
    options: Any, source: str | Path, output: str | Path, *, model: str | None
) -> StepReport:
    """Run one step (options from :func:`step_options`) from ``source`` into ``output``;
    ``filter`` samples with ``model``."""
    if isinstance(options, DedupOptions):
        from rlvr.data.dedup import dedup_file

        return dedup_file(source, output, field=options.field)
    if isinstance(options, DecontaminateOptions):
        from rlvr.data.contamination import decontaminate_file

        return decontaminate_file(
            source,
            output,
            options.against,
            n=options.ngram,
            common=options.common,
            field=options.field,
            split=options.split,
        )
    if model is None:
        raise ValueError("filter samples with a model: set the pipeline's model (or model=...)")
    return filter_step(options, source, output, model)


def filter_step(
    options: FilterOptions,
    source: str | Path,
    output: str | Path,
    model: str,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    verifier_options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> StepReport:
    """``filter`` with ``model`` loaded in ``dtype`` on ``device``; ``verifier_options``: the
    verifier's ``correct`` / ``wrong`` / ``extract``; ``progress(done, total)`` after each batch.

    The input rows, the outputs and the recorded scores are checked before the model loads."""
    from rlvr.evaluation.filtering import FilterJob, prepare_filter, run_filter
    from rlvr.evaluation.harness import EvalConfig
    from rlvr.generation import SamplingConfig
    from rlvr.models import load_model
    from rlvr.rewards.registry import get_verifier
    from rlvr.rewards.scoring import ScoringConfig

    config = EvalConfig(
        n=options.n,
        ks=(1,),
        sampling=SamplingConfig(
            max_new_tokens=options.max_tokens,
            temperature=options.temperature,
            top_p=options.top_p,
        ),
        batch_size=options.batch_size,
        seed=options.seed,
        system_prompt=options.system_prompt,
        scoring=ScoringConfig(timeout_s=options.timeout, workers=options.workers),
    )
    rule = parse_rule(options.keep, options.n)
    job = FilterJob(rule, config, options.field_map(), options.min_tests, model=model)
    verifier = get_verifier(options.verifier, **(verifier_options or {}))
    prepared = prepare_filter(source, output, job, verifier)
    policy, tokenizer = load_model(model, dtype=dtype, device=device)
    return run_filter(
        prepared,
        output,
        job,
        model=policy,
        tokenizer=tokenizer,
        verifier=verifier,
        progress=progress,
    )
