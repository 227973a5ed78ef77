"""A pipeline file and its types: :class:`Stage`, :class:`Pipeline` and :class:`StageResult`
(what a stage left behind); reading a file (:func:`read_pipeline`, :func:`parse_pipeline`) and
the names of the files a pipeline writes in its output directory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from rlvr.bundled import bundled_names, read_source
from rlvr.evaluation.data_steps import STEPS
from rlvr.train.overrides import NOT_A_KEY, from_file, read_beside

KINDS = ("sft", "train", "data")
STAGE_FILE = "stage.json"
DATA_FILE = "data.jsonl"
"""What a data stage writes in its directory."""
SUMMARY_FILE = "pipeline.json"


@dataclass(frozen=True)
class Stage:
    """One stage of a pipeline."""

    name: str
    """Unique name (no ``/``, ``:`` or ``=``, not starting with ``.``, not ``pipeline.json``);
    also the stage's run directory under the pipeline's output directory."""
    kind: str
    """``sft`` (``rlvr sft``), ``train`` (``rlvr train``) or ``data`` (a data step)."""
    config: str
    """Embedded config name or YAML file of the stage; for ``data``, the step's name."""
    overrides: tuple[str, ...] = ()
    """``key=value`` overrides applied to the config; for ``data``, the step's options."""

    def __post_init__(self) -> None:
        name = self.name
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"name must be a plain directory name, got {name!r}")
        if name == SUMMARY_FILE:
            raise ValueError(f"name {name!r} is the pipeline's summary file; choose another")
        if ":" in name or "=" in name:  # NAME:key=value on the command line names the stage
            raise ValueError(
                f"name must be without ':' or '=' (NAME:key=value gives a stage an option), "
                f"got {name!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(
                f"stage {name!r}: kind must be one of {list(KINDS)}, got {self.kind!r}"
            )
        if not self.config:
            raise ValueError(f"stage {name!r}: config must name a config or YAML file")
        if self.kind == "data" and self.config not in STEPS:
            raise ValueError(f"stage {name!r}: a data stage's config is one of {list(STEPS)}")
        if not all("=" in o for o in self.overrides):
            raise ValueError(f"stage {name!r}: overrides must be a list of 'key=value' strings")


@dataclass(frozen=True)
class Pipeline:
    """Stages run in order, each from the previous stage's final model (a pipeline file's keys:
    ``stages``, ``output_dir``, ``model``)."""

    LABEL: ClassVar[str] = "a pipeline"

    stages: tuple[Stage, ...]
    """The stages, in order."""
    output_dir: str = "runs/pipeline"
    """Where the stages' run directories and ``pipeline.json`` go."""
    model: str | None = None
    """The first stage's model (``None``: the one its config names)."""
    source: str = field(default="<pipeline>", metadata=NOT_A_KEY)
    """Where the pipeline was read from (for messages)."""
    folder: Path = field(default_factory=Path.cwd, metadata=NOT_A_KEY)
    """Folder relative paths are read from."""

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("'stages' must be a non-empty list")
        names = [s.name for s in self.stages]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"stage names must be unique, repeated: {repeated}")
        if not self.output_dir:
            raise ValueError("output_dir must be a non-empty string")


@dataclass(frozen=True)
class StageResult:
    """What a stage left behind."""

    name: str
    """Stage name."""
    run_dir: Path
    """Its run directory."""
    model_dir: Path | None
    """Its final model (the next stage's starting point); a data stage's: the model it was
    given (``None`` when none was)."""
    status: str
    """``ran``, ``resumed`` or ``skipped`` (finished in an earlier invocation)."""
    evals: dict[int, dict[str, float]] = field(default_factory=dict)
    """Held-out scores by step (RL stages)."""
    output: Path | None = None
    """A data stage's kept rows."""
    counts: dict[str, int] = field(default_factory=dict)
    """A data stage's ``kept`` count and dropped counts by reason."""


def _model_of(result: StageResult) -> str | None:
    """The model the stage after ``result``'s starts from."""
    return None if result.model_dir is None else str(result.model_dir)


def embedded_pipelines() -> list[str]:
    """Names of the pipelines shipped in ``rlvr/configs/pipelines``."""
    return bundled_names("rlvr", "configs/pipelines")


def read_pipeline(name_or_path: str) -> Pipeline:
    """Parse a pipeline file (or an embedded pipeline by name); errors name the file and stage.
    A folder is refused, one holding ``pipeline.json`` (a pipeline's output directory, given
    to continue it) with the command that does."""
    if Path(name_or_path).is_dir():
        raise ValueError(_not_a_file(Path(name_or_path)))
    source = read_source(
        name_or_path,
        package="rlvr",
        folder="configs/pipelines",
        kind="an embedded pipeline",
        choices=embedded_pipelines,
    )
    return parse_pipeline(source.data, source=source.where, folder=source.folder)


def _not_a_file(folder: Path) -> str:
    """Why ``folder`` is no pipeline file; for an output directory (its ``pipeline.json`` names
    the file it was made from), the command that continues it."""
    summary = folder / SUMMARY_FILE
    try:
        made = json.loads(summary.read_text()).get("source") if summary.is_file() else None
    except (OSError, ValueError, AttributeError):
        made = None
    if not isinstance(made, str):
        return f"pipeline file {folder}: is a directory, not a YAML file"
    embedded = "rlvr/configs/pipelines/"
    name = Path(made).stem if made.startswith(embedded) else made
    return (
        f"pipeline file {folder}: is a pipeline's output directory, not its file; to continue "
        f"it: rlvr pipeline {name} -o {folder}"
    )


def parse_pipeline(
    data: Any, *, source: str = "<pipeline>", folder: Path | None = None
) -> Pipeline:
    """A :class:`Pipeline` from its YAML mapping (errors start with ``source``)."""
    pipeline = from_file(Pipeline, data, source)
    folder = folder or Path.cwd()
    model = pipeline.model and _local(pipeline.model, folder, model=True)
    return replace(pipeline, source=source, folder=folder, model=model)


def _local(value: str, folder: Path, *, model: bool = False) -> str:
    """``value`` read from ``folder`` as a run configuration's YAML file reads its paths
    (:func:`~rlvr.train.overrides.read_beside`); ``./`` and ``../`` ones made absolute."""
    return read_beside(folder, value, model=model, absolute=value.startswith(("./", "../")))
