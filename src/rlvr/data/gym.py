"""Writing reasoning-gym task sets to JSONL, reproducibly from a seed.

Each row is a reasoning-gym entry plus an id::

    {"id": "chain_sum-0-3", "question": "...", "answer": "-4", "metadata": {...}}

Load them with the ``reasoning_gym`` field mapping (the verifier then receives the whole
entry, metadata included) and score with the ``reasoning_gym`` verifier. Questions are
unique within a file, and ``exclude`` drops every question already in other files, so a
held-out set written with another seed never overlaps the training set.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlvr.atomic import atomic_path
from rlvr.builtins import did_you_mean

MAX_DRAWS_PER_ROW = 20
UNIONS = (typing.Union, types.UnionType)


def _jsonable(value: Any) -> Any:
    """JSON fallback for metadata values: sets become sorted lists, NumPy scalars numbers."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if hasattr(value, "tolist"):
        return value.tolist()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return repr(value)


def check_gym_task(task: str) -> None:
    """Refuse, with one line, a name that is no reasoning-gym task."""
    from reasoning_gym.factory import DATASETS

    if task not in DATASETS:
        raise ValueError(  # as rlvr.rewards.reasoning_gym.unknown_task says it
            f"unknown reasoning-gym task {task!r}{did_you_mean(task, DATASETS)}; "
            f"rlvr data tasks lists all {len(DATASETS)}"
        )


def check_gym_config(task: str, config: Mapping[str, Any]) -> None:
    """Refuse, with one line, an unknown ``task``, a config field it has not, a value of
    another type than the field's, or one the task's own checks refuse; generates nothing."""
    from reasoning_gym.factory import DATASETS

    check_gym_task(task)
    fields = {f.name: f for f in dataclasses.fields(DATASETS[task][1])}
    valid = set(fields) - {"seed", "size"}
    unknown = sorted(set(config) - valid)
    if unknown:
        raise ValueError(f"task {task!r} has no config field(s) {unknown}; valid: {sorted(valid)}")
    for name, value in config.items():
        if (kind := _wrong_type(value, fields[name])) is not None:
            raise ValueError(f"task {task!r}: config field {name} must be {kind}, got {value!r}")
    try:
        made = DATASETS[task][1](**config)
        if hasattr(made, "validate"):  # as reasoning_gym.create_dataset checks a config
            made.validate()
    except (AssertionError, TypeError, ValueError) as err:  # reasoning-gym checks with assert
        raise ValueError(f"invalid config for task {task!r}: {err}") from None


SCALARS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
"""The field types whose values :func:`check_gym_config` checks, as its message names them."""


def _wrong_type(value: Any, field: dataclasses.Field) -> str | None:
    """What a config field of scalar type (``int``, ``Optional[float]``, ...) must be when
    ``value`` is not that; ``None`` when it is, or when the field's type is not a scalar's."""
    kinds = typing.get_args(field.type) if typing.get_origin(field.type) in UNIONS else ()
    kinds = [k for k in kinds or (field.type,) if k is not type(None)]
    if value is None and len(kinds) < len(typing.get_args(field.type)):  # Optional[...]
        return None
    if not kinds or any(k not in SCALARS for k in kinds):
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if any(
        isinstance(value, k)
        if k in (bool, str)
        else number and (k is float or isinstance(value, k))
        for k in kinds
    ):
        return None
    if field.default is not dataclasses.MISSING and type(value) is type(field.default):
        return None  # the task's own default is of this type (an int field whose default is 0.5)
    return " or ".join(SCALARS[k] for k in kinds)


def _create(task: str, size: int, seed: int, config: Mapping[str, Any]):
    import reasoning_gym

    check_gym_config(task, config)
    try:
        return reasoning_gym.create_dataset(task, size=size, seed=seed, **config)
    except AssertionError as err:  # reasoning-gym validates configs with assert
        raise ValueError(f"invalid config for task {task!r}: {err}") from None


def gym_rows(
    task: str,
    *,
    size: int,
    seed: int,
    config: Mapping[str, Any] | None = None,
    exclude: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """``size`` entries of ``task`` with unique questions not in ``exclude``."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    dataset = _create(task, size, seed, dict(config or {}))
    seen, rows = set(exclude), []
    for index in range(size * MAX_DRAWS_PER_ROW):
        try:
            entry = dataset[index]
        except IndexError:
            break
        if entry["question"] in seen:
            continue
        seen.add(entry["question"])
        rows.append({"id": f"{task}-{seed}-{index}", **entry})
        if len(rows) == size:
            return rows
    raise ValueError(
        f"task {task!r} (seed {seed}) gave only {len(rows)} new unique questions, {size} asked"
    )


def questions_in(paths: Iterable[str | Path]) -> set[str]:
    """Every ``question`` in the given JSONL files (for ``exclude``)."""
    from rlvr.data.loading import field_values

    return field_values(paths, "question")


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write ``rows`` one JSON object per line (parent directories created); returns the count.

    The file appears whole or not at all: a command killed while the rows are generated
    leaves an earlier file as it was, never one that ends early."""
    count = 0
    with atomic_path(Path(path)) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=_jsonable, ensure_ascii=False) + "\n")
            count += 1
    return count
