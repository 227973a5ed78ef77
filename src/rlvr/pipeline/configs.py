"""What each stage runs with: a model stage's run configuration (:func:`stage_config`), a data
stage's step options and input file (:func:`data_step`), and what a finished stage's
``stage.json`` records of them (:func:`stage_options`)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rlvr.dotted import flatten
from rlvr.evaluation.data_steps import step_options
from rlvr.pipeline.overrides import _names_model
from rlvr.pipeline.spec import DATA_FILE, Pipeline, Stage, _local
from rlvr.train.config import SFTConfig, TrainConfig
from rlvr.train.overrides import load_config, to_dict

PATH_KEYS = ("data.train", "data.eval")
"""Override keys whose relative values are read from the pipeline's folder
(:func:`~rlvr.pipeline.spec._local`)."""
KEEP_HINT = (
    "filter needs keep=RULE, e.g. keep=mean>0.5 (a majority of its n samples correct; with "
    "n=16, pass@16>0.5 keeps every prompt solved once: docs/data.md)"
)
"""What a filter stage without ``keep`` is told."""


def stage_config(
    pipeline: Pipeline, stage: Stage, model: str | None, extra: Sequence[str] = ()
) -> TrainConfig | SFTConfig:
    """The stage's configuration: its config and overrides, then ``extra``, model and run directory.

    Relative data paths in the stage's own overrides are read from the pipeline file's
    folder; those in ``extra`` (the command line's) from the current folder, as in ``rlvr train``.
    """
    overrides = []
    for item in stage.overrides:
        key, _, value = item.partition("=")
        if _names_model(key, value):
            item = f"{key}={_local(value, pipeline.folder, model=True)}"
        elif key in PATH_KEYS:
            item = f"{key}={_data_path(pipeline, stage, value, pipeline.folder)}"
        overrides.append(item)
    for item in extra:
        key, _, value = item.partition("=")
        at = key in PATH_KEYS and value.startswith("@")
        overrides.append(f"{key}={_data_path(pipeline, stage, value, Path.cwd())}" if at else item)
    _refuse_replaced(pipeline, stage, overrides)
    if model is not None:
        overrides.append(f"model.name={model}")
    overrides.append(f"log.output_dir={Path(pipeline.output_dir) / stage.name}")
    cls = SFTConfig if stage.kind == "sft" else TrainConfig
    try:
        return load_config(cls, _local(stage.config, pipeline.folder), overrides)
    except (TypeError, ValueError) as err:
        hint = _other_kind(pipeline, stage) or _by_name(pipeline, stage, str(err), extra)
        raise ValueError(f"{pipeline.source}: stage {stage.name!r}: {err}{hint}") from None


def _by_name(pipeline: Pipeline, stage: Stage, err: str, extra: Sequence[str]) -> str:
    """`` (a key=value on the command line reaches every SFT and RL stage; ...)`` naming the
    other kind's stages as ``NAME:key=value`` when ``err`` is an unknown key the command line
    gave (``eval.reports=false`` reached the SFT stage, whose ``eval`` has no ``reports``),
    else ``""``."""
    from rlvr.train.config_keys import config_keys

    key = err.removeprefix("unknown key '").partition("'")[0]
    given = next((i for i in extra if i.partition("=")[0] == key), None)
    others = [s.name for s in pipeline.stages if s.kind not in ("data", stage.kind)]
    known = [k.key for k in config_keys(TrainConfig if stage.kind == "sft" else SFTConfig)]
    takes = any(key == k or key.startswith(f"{k}.") for k in known)  # not a typo
    if not err.startswith("unknown key '") or given is None or not others or not takes:
        return ""
    named = " ".join(f"{name}:{given}" for name in others)
    return (
        f" (a key=value on the command line reaches every SFT and RL stage; give it to the "
        f"stages that take it by name: {named})"
    )


def _other_kind(pipeline: Pipeline, stage: Stage) -> str:
    """`` (config X is a kind: OTHER config)`` when the model stage's config, without overrides,
    loads as the other kind's but not as its own (``kind: train`` with ``config: sft`` was only
    ``unknown key 'epochs'``), else ``""``."""
    own, other = (SFTConfig, TrainConfig) if stage.kind == "sft" else (TrainConfig, SFTConfig)

    def loads(cls: type) -> bool:  # a placeholder data file: an SFT config names none
        try:
            load_config(cls, _local(stage.config, pipeline.folder), ["data.train=x.jsonl"])
        except (TypeError, ValueError, OSError):
            return False
        return True

    if loads(own) or not loads(other):
        return ""
    return (
        f" (config {stage.config!r} is a kind: {'sft' if other is SFTConfig else 'train'} config)"
    )


def _refuse_replaced(pipeline: Pipeline, stage: Stage, overrides: Sequence[str]) -> None:
    """Refuse overrides the pipeline would replace: ``log.output_dir`` (always
    ``output_dir/<stage name>``) and, in the file, the model of a stage that starts from the
    previous stage's model (or, the first, from the file's ``model``)."""
    where = f"{pipeline.source}: stage {stage.name!r}"
    for item in overrides:
        if item.partition("=")[0].strip() == "log.output_dir":
            raise ValueError(
                f"{where}: {item!r}: a stage runs in output_dir/<stage name>; choose the "
                "pipeline's directory with -o or output_dir"
            )
    if stage.name == pipeline.stages[0].name and pipeline.model is None:
        return
    for item in stage.overrides:
        key, _, value = item.partition("=")
        if _names_model(key, value):
            raise ValueError(
                f"{where}: {item!r}: the stage's model is the previous stage's final model "
                "(the first stage's: the file's model)"
            )


def _data_path(pipeline: Pipeline, stage: Stage, value: str, folder: Path) -> str:
    """A data path of ``stage``: ``@NAME`` is data stage NAME's output (NAME before ``stage``),
    a relative path is read from ``folder``."""
    if not value.startswith("@"):
        return _local(value, folder)
    names = [s.name for s in pipeline.stages]
    earlier = pipeline.stages[: names.index(stage.name)]
    if value[1:] not in [s.name for s in earlier if s.kind == "data"]:
        raise ValueError(
            f"{pipeline.source}: stage {stage.name!r}: {value}: no earlier data stage {value[1:]!r}"
        )
    return str((Path(pipeline.output_dir) / value[1:] / DATA_FILE).absolute())


def data_step(pipeline: Pipeline, stage: Stage, extra: Sequence[str] = ()) -> tuple[Any, str]:
    """A data stage's typed options and input file.

    Its ``overrides`` (then ``extra``, the command line's) are the step's options, values read
    as YAML; ``input=`` names the file (``@NAME``: data stage NAME's output; default: the
    previous data stage's output). A relative ``input`` is read from the pipeline file's
    folder, as are ``./`` and ``../`` paths in ``against`` (whose other values are set or Hub
    names); those in ``extra`` are read from the current folder.
    """
    where = f"{pipeline.source}: stage {stage.name!r}"
    options: dict[str, Any] = {}
    names = [s.name for s in pipeline.stages]
    before = [s.name for s in pipeline.stages[: names.index(stage.name)] if s.kind == "data"]
    source = f"@{before[-1]}" if before else None
    given = [(o, pipeline.folder) for o in stage.overrides] + [(o, Path.cwd()) for o in extra]
    for item, folder in given:
        key, _, value = (part.strip() for part in item.partition("="))
        if key == "input":
            source = value if value.startswith("@") else _file(value, folder)
        elif key == "against":
            sets = _yaml_value(where, item, value)
            sets = [sets] if isinstance(sets, str) else sets if isinstance(sets, list) else []
            options[key] = [_local(v, folder) if isinstance(v, str) else v for v in sets]
        else:
            options[key] = _yaml_value(where, item, value)
    if source is None:
        raise ValueError(f"{where}: the first data stage needs input=FILE")
    if stage.config == "filter" and not options.get("keep"):
        raise ValueError(f"{where}: {KEEP_HINT}")
    try:
        return step_options(stage.config, options), _data_path(
            pipeline, stage, source, pipeline.folder
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _yaml_value(where: str, item: str, value: str) -> Any:
    """A data stage option's value read as YAML; one that is not YAML names the override."""
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as err:
        raise ValueError(f"{where}: override {item!r}: value is not valid YAML: {err}") from None


def _file(value: str, folder: Path) -> str:
    """The file ``value`` (``~`` expanded), a relative path read from ``folder``: a data stage's
    ``input`` is always a file, never a dataset name, so a bare ``raw.jsonl`` is one too."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (folder / path).resolve())


def stage_options(
    pipeline: Pipeline, stage: Stage, model: str | None, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """What ``stage`` makes its output from, as its ``stage.json`` records it (dotted keys): a
    model stage's whole configuration (``model.name``: the model it starts from); a data
    stage's step, options, ``input`` file and the file's SHA-256 (``decontaminate``: and
    those of its local ``against`` files and folders; ``filter``: and ``model``)."""
    if stage.kind != "data":
        return flatten(to_dict(stage_config(pipeline, stage, model, extra)))
    return _data_made_from(stage, *data_step(pipeline, stage, extra), model)


def _data_made_from(stage: Stage, options: Any, source: str, model: str | None) -> dict[str, Any]:
    """:func:`stage_options` of a data stage whose step ``options`` and ``source`` are read."""
    made = {"step": stage.config, **dataclasses.asdict(options), "input": source}
    made["input_sha256"] = _sha256(source) if Path(source).is_file() else None
    if stage.config == "decontaminate":  # an edited evaluation file drops other rows
        made["against_sha256"] = [_digest(spec.partition("::")[0]) for spec in options.against]
    if stage.config == "filter":
        made["model"] = model
    return flatten(made)


def _sha256(path: str | Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (``hashlib.file_digest`` needs Python 3.11)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest(source: str) -> str | None:
    """SHA-256 of a local file, or of a folder's files (their names and digests); ``None`` for
    a named set, a Hub name or a generated set (or a file that is gone)."""
    path = Path(source).expanduser()
    if path.is_file():
        return _sha256(path)
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{item.relative_to(path).as_posix()}\0{_sha256(item)}\n".encode())
    return digest.hexdigest()
