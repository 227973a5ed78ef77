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
               ``system_prompt``, ``timeout=10``, ``workers=1``,
               ``sampler=lean``, ``sampler_options``
=============  ==================================================  ===============================

The options mirror the flags of ``rlvr data dedup / decontaminate / filter``. The steps live
here, beside the evaluation harness, because ``filter`` samples with it; ``dedup`` and
``decontaminate`` need only :mod:`rlvr.data`.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.contamination import NgramIndex
from rlvr.data.fields import FieldMap, field_map
from rlvr.data.rowfiles import StepReport
from rlvr.evaluation.harness import EvalConfig, Progress
from rlvr.evaluation.keep_rule import parse_rule
from rlvr.generation import SamplingConfig
from rlvr.generation.registry import missing_package, named_options
from rlvr.rewards.registry import get_verifier
from rlvr.rewards.scoring import ScoringConfig
from rlvr.seeds import check_seed


@dataclass(frozen=True)
class DedupOptions:
    """``dedup``: exact duplicates of the normalised prompt."""

    field: str | None = None
    """Prompt field or field mapping (``None``: prompt, question, problem, text, messages)."""

    def __post_init__(self) -> None:
        _text("field", self.field, optional=True)


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
        for spec in self.against:
            _text("against", spec)
        _whole("ngram", self.ngram, least=1)
        _whole("common", self.common, least=0)
        NgramIndex(self.ngram, self.common)  # its own checks
        _text("field", self.field, optional=True)
        _text("split", self.split)


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
    sampler: str = "lean"
    """Sampler by name (``lean``, ``hf``, ``vllm``), as ``rollout.sampler``."""
    sampler_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Its options, as ``rollout.sampler_options``."""

    def __post_init__(self) -> None:
        if not self.keep:
            raise ValueError("filter needs keep=RULE (e.g. 'mean>0.5')")
        for name in ("keep", "verifier", "sampler"):
            _text(name, getattr(self, name))
        for name in ("fields", "prompt_field", "answer_field", "system_prompt"):
            _text(name, getattr(self, name), optional=True)
        for name, least in (("n", 1), ("min_tests", 0), ("max_tokens", 1), ("batch_size", 1)):
            _whole(name, getattr(self, name), least)
        check_seed("seed", self.seed)
        _whole("workers", self.workers, least=0)
        for name in ("temperature", "top_p", "timeout"):
            _real(name, getattr(self, name))
        # what the run would refuse, refused before any stage runs or any model loads
        parse_rule(self.keep, self.n)
        self.field_map()
        with warnings.catch_warnings():  # n > 1 at temperature 0: said once, when it samples
            warnings.simplefilter("ignore")
            self.eval_config()
        get_verifier(self.verifier)
        if not isinstance(self.sampler_options, dict):
            raise ValueError(f"sampler_options must be a mapping, got {self.sampler_options!r}")
        named_options(self.sampler, self.sampler_options, ("sampler", "sampler_options"))

    def eval_config(self) -> EvalConfig:
        """How the filter samples and scores (its checks: ``n``, batch size, sampling, limits)."""
        return EvalConfig(
            n=self.n,
            ks=(1,),
            sampling=SamplingConfig(
                max_new_tokens=self.max_tokens, temperature=self.temperature, top_p=self.top_p
            ),
            batch_size=self.batch_size,
            seed=self.seed,
            system_prompt=self.system_prompt,
            scoring=ScoringConfig(timeout_s=self.timeout, workers=self.workers),
        )

    def field_map(self) -> FieldMap:
        """The input's field mapping: ``fields``, or the one ``prompt_field`` /
        ``answer_field`` name (an unknown mapping or both ways at once are refused)."""
        if self.prompt_field is None and self.answer_field is None:
            return field_map(self.fields)
        if self.fields is not None:
            raise ValueError("give --fields or --prompt-field / --answer-field, not both")
        return FieldMap(prompt=self.prompt_field or "prompt", answer=self.answer_field or "answer")


def _text(name: str, value: Any, *, optional: bool = False) -> None:
    """Refuse an option that is not a string (YAML reads ``field=1`` as a number)."""
    if not isinstance(value, str) and not (optional and value is None):
        raise ValueError(f"{name} must be a string, got {value!r}")


def _whole(name: str, value: Any, least: int | None) -> None:
    """Refuse an option that is not an integer (``ngram=abc``, ``n=1.5``) or is below ``least``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if least is not None and value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")


def _real(name: str, value: Any) -> None:
    """Refuse an option that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")


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


def check_files(options: Any, source: str | Path, skip: frozenset[str] = frozenset()) -> None:
    """Read the local files a step reads (``skip``: those not written yet), as it reads them,
    before it runs: ``source`` (every row's prompt; ``filter``: every row under its field
    mapping) and, for ``decontaminate``, each local file or folder in ``against``. Named sets,
    Hub names and generated sets are not read. Errors start with ``input`` or ``against``."""
    from rlvr.data.contamination import eval_set_rows
    from rlvr.data.loading import MissingSplit
    from rlvr.data.rowfiles import prompt_field, read_rows, row_prompts
    from rlvr.evaluation.filtering import read_input

    try:
        if str(source) not in skip and isinstance(options, FilterOptions):
            read_input(source, options.field_map())
        elif str(source) not in skip:
            rows = read_rows(source)
            row_prompts(rows, prompt_field(rows, options.field, hint="field=NAME"))
    except ValueError as err:
        raise ValueError(f"input: {err}") from None
    for spec in getattr(options, "against", ()):
        local = spec.partition("::")[0]
        if local in skip or not Path(local).expanduser().exists():
            continue
        try:
            rows, name = eval_set_rows(spec, options.split)
            row_prompts(rows, name)
        except MissingSplit as err:
            raise ValueError(f"against: {err}; name one with split=NAME") from None
        except ValueError as err:
            raise ValueError(f"against: {err}") from None


def run_step(
    options: Any,
    source: str | Path,
    output: str | Path,
    *,
    model: str | None,
    progress: Progress | None = None,
) -> StepReport:
    """Run one step (options from :func:`step_options`) from ``source`` into ``output``;
    ``filter`` samples with ``model`` and tells ``progress(prompts scored, prompts)``."""
    if isinstance(options, DedupOptions):
        from rlvr.data.dedup import dedup_file

        return dedup_file(source, output, field=options.field)
    if isinstance(options, DecontaminateOptions):
        from rlvr.data.contamination import decontaminate_file
        from rlvr.data.loading import MissingSplit

        try:
            return decontaminate_file(
                source,
                output,
                options.against,
                n=options.ngram,
                common=options.common,
                field=options.field,
                split=options.split,
            )
        except MissingSplit as err:
            raise MissingSplit(
                f"{err}; name one with split=NAME in the stage's overrides"
            ) from None
    if model is None:
        raise ValueError("filter samples with a model: set the pipeline's model (or model=...)")
    return filter_step(options, source, output, model, progress=progress)


def filter_step(
    options: FilterOptions,
    source: str | Path,
    output: str | Path,
    model: str,
    *,
    dtype: str = "float32",
    device: str = "auto",
    verifier_options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> StepReport:
    """``filter`` with ``model`` loaded in ``dtype`` on ``device``; ``verifier_options``: the
    verifier's ``correct`` / ``wrong`` / ``extract``; ``progress(done, total)`` after each batch.

    The input rows, the outputs and the recorded scores are checked before the model loads."""
    from rlvr.evaluation.filtering import FilterJob, prepare_filter, run_filter
    from rlvr.models import load_model

    rule = parse_rule(options.keep, options.n)
    job = FilterJob(
        rule,
        options.eval_config(),
        options.field_map(),
        options.min_tests,
        model=model,
        sampler=options.sampler,
        sampler_options=options.sampler_options,
    )
    verifier = get_verifier(options.verifier, **(verifier_options or {}))
    prepared = prepare_filter(source, output, job, verifier)
    if missing := missing_package(options.sampler):
        raise ValueError(f"sampler={options.sampler}: {missing}")
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
