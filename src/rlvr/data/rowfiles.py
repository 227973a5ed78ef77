"""Prompt files as rows: read a JSONL/Parquet file whole, find its prompt field, write rows back.

The data-cleaning steps (``rlvr data dedup``, ``decontaminate``, ``filter``) keep or drop
whole rows and write the kept ones unchanged, so they work on rows rather than on
:class:`~rlvr.data.loading.Example` s. The prompt field is the one named (``--field``, or a
mapping's ``prompt`` in :data:`~rlvr.data.fields.FIELD_MAPS`), else the first of
:data:`PROMPT_FIELDS` that the first row has.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.atomic import atomic_path, why_not_creatable
from rlvr.data.fields import DATASETS, FIELD_MAPS
from rlvr.data.loading import FILE_SUFFIXES, Row, get_path, looks_like_path, read_file
from rlvr.data.text import prompt_text

PROMPT_FIELDS = ("prompt", "question", "problem", "text", "messages")
"""Fields tried, in order, when no prompt field is named."""


def read_rows(path: str | Path) -> list[Row]:
    """``(where, row)`` of every row of a ``.jsonl`` / ``.json`` / ``.ndjson`` / ``.parquet`` file."""
    path = Path(path).expanduser()
    if path.is_dir():  # a datasets folder: these steps write back one file of the same rows
        raise ValueError(
            f"{path}: is a directory; give one .jsonl, .json, .ndjson or .parquet file "
            "(a datasets folder: write its split to one with Dataset.to_json('rows.jsonl'))"
        )
    if not path.is_file():
        raise ValueError(f"{path}: no such file{_hub_hint(str(path))}")
    rows = list(read_file(path))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _hub_hint(source: str) -> str:
    """For a name that is no path but a named or hub data set (``math500``, ``org/name``): how
    to write its rows to a file these steps read; ``""`` otherwise."""
    if looks_like_path(source) or (source not in DATASETS and source.count("/") != 1):
        return ""
    spec = DATASETS.get(source)
    repo, split = (spec.hub, spec.split) if spec else (source, "train")
    config = f"{spec.configs[0]!r}, " if spec and spec.configs[0] else ""
    return (
        f" (a hub data set is read from a file: write its rows to one with "
        f"datasets.load_dataset({repo!r}, {config}split={split!r}).to_json('rows.jsonl'))"
    )


def prompt_field(rows: list[Row], field: str | None = None, *, hint: str = "--field") -> str:
    """The prompt field: ``field`` (a field path or a mapping name), else the first of
    :data:`PROMPT_FIELDS` the first row has (``hint``: how the error says to name it)."""
    if field is not None:
        return FIELD_MAPS[field].prompt if field in FIELD_MAPS else field
    where, first = rows[0]
    found = next((name for name in PROMPT_FIELDS if name in first), None)
    if found is None:
        raise ValueError(
            f"{where}: no prompt field ({', '.join(PROMPT_FIELDS)}); name it with {hint}"
        )
    return found


def row_prompts(rows: list[Row], field: str) -> list[str]:
    """Each row's prompt text (chat messages: their user contents); errors name the row."""
    out = []
    for where, row in rows:
        value = get_path(row, field, where, "prompt field")
        try:
            out.append(prompt_text(value))
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return out


def write_rows(rows: Iterable[dict[str, Any]], path: str | Path) -> int:
    """Write ``rows`` to JSONL (or Parquet for a ``.parquet`` path) atomically; returns the count.

    A temporary file beside ``path`` is renamed over it; it is removed if the writing fails."""
    path = Path(path).expanduser()
    rows = list(rows)
    with atomic_path(path) as tmp:
        _write_file(rows, tmp, path)
    return len(rows)


def _write_file(rows: list[dict[str, Any]], tmp: Path, path: Path) -> None:
    """Write ``rows`` to ``tmp`` in the format ``path``'s suffix names (errors name ``path``)."""
    if path.suffix == ".parquet":
        _write_parquet(rows, tmp, path)
    else:
        with tmp.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(_json_line(row, path) + "\n")


def _json_line(row: dict[str, Any], path: Path) -> str:
    """``row`` as one JSON line, the Parquet values JSON has no type for written as
    :func:`json_value` does; another such value is one error naming ``path`` and its column."""
    try:
        return json.dumps(row, ensure_ascii=False, default=json_value)
    except TypeError as err:
        column = next(k for k, v in row.items() if not _json_ok(v))
        raise ValueError(
            f"{path}: column {column!r} holds a {err} value, which JSON lines cannot hold; "
            "convert or drop the column first"
        ) from None


def json_value(value: Any) -> Any:
    """Timestamps, dates and times as ISO 8601 text, decimals as their exact text, bytes as
    base64 text; ``TypeError`` (the type's name) for anything else."""
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, default=json_value)
    except TypeError:
        return False
    return True


def _write_parquet(rows: list[dict[str, Any]], tmp: Path, path: Path) -> None:
    """Write ``rows`` to ``tmp`` as Parquet; rows Parquet cannot hold (a column mixing numbers
    and strings, an empty object) give one error naming ``path`` and the column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    except (pa.ArrowException, OverflowError) as err:
        column = _bad_column(rows)
        where = f" (column {column!r})" if column else ""
        raise ValueError(
            f"{path}: cannot write these rows as Parquet{where}: {str(err).rstrip('.')}; "
            "write a .jsonl file instead"
        ) from None


def _bad_column(rows: list[dict[str, Any]]) -> str | None:
    """The first column whose values pyarrow cannot put in one array, if any."""
    import pyarrow as pa

    for name in dict.fromkeys(key for row in rows for key in row):
        try:
            pa.array([row.get(name) for row in rows])
        except (pa.ArrowException, OverflowError):
            return name
    return None


@dataclass(frozen=True)
class StepReport:
    """What a data-cleaning step kept and dropped, and where it wrote them."""

    kept: int
    """Rows written to ``output``."""
    dropped: dict[str, int]
    """Rows dropped, by reason."""
    output: Path
    """The kept rows."""
    dropped_file: Path
    """The dropped rows, each with why (for auditing)."""
    unverified: int = 0
    """``filter``: completions whose verification failed (error or timeout), scored as wrong."""
    completions: int = 0
    """``filter``: completions scored."""

    def summary(self) -> str:
        """One line: ``kept 90 of 100 (dropped 7 duplicate, 3 contaminated) -> out.jsonl``."""
        total = self.kept + sum(self.dropped.values())
        reasons = ", ".join(f"{n} {why}" for why, n in self.dropped.items() if n)
        line = f"kept {self.kept} of {total} (dropped {reasons or 'none'}) -> {self.output}"
        if self.unverified:
            line += (
                f"; {self.unverified} of {self.completions} completions could not be verified "
                "(error or timeout, scored as wrong: see the scores file)"
            )
        return line


def dropped_file(output: str | Path) -> Path:
    """Where the dropped rows of a step writing ``output`` go: ``<stem>.dropped.jsonl`` beside it."""
    output = Path(output).expanduser()
    return output.with_name(f"{output.stem}.dropped.jsonl")


def check_output_file(
    output: str | Path,
    suffixes: tuple[str, ...] = FILE_SUFFIXES,
    written_as: str = "JSON lines or Parquet",
    name_a: str = ".jsonl or .parquet",
) -> Path:
    """``output`` (``~`` expanded), or a ``ValueError`` before any work when it is a directory,
    has a suffix not in ``suffixes`` (rows ``written_as`` that no rlvr command would read
    back under that name; the message asks for a ``name_a`` file), or lies in a file or in a
    folder that is not writable."""
    output = Path(output).expanduser()
    if output.is_dir():
        raise ValueError(f"output {output}: is a directory; name a {name_a} file")
    if output.suffix not in suffixes:  # JSON lines under another name: unreadable next
        raise ValueError(
            f"output {output}: unsupported file type {output.suffix or 'none'!r} (rows are "
            f"written as {written_as}); name a {name_a} file"
        )
    if problem := why_not_creatable(output.parent):  # before the filter loads a model
        raise ValueError(f"output {output}: {problem}")
    return output


def check_step_output(
    output: str | Path, inputs: Iterable[str | Path], *, also: Iterable[Path] = ()
) -> None:
    """Refuse, before a step does any work, an ``output`` that is a directory (or whose dropped
    rows' file or ``also``, the filter's scores, is one), in a folder that is not writable, or
    a file the next step could not read (``.csv``, no suffix), or whose kept rows, dropped rows
    (or ``also``) would overwrite one of ``inputs``."""
    output = check_output_file(output)
    for written in (output, dropped_file(output), *also):
        if written != output and written.is_dir():
            raise ValueError(f"output {output}: its {written.name} is a directory; remove it")
        for source in inputs:
            what = "it" if written == output else f"its {written.name}"
            if _same_file(written, Path(source).expanduser()):
                raise ValueError(
                    f"output {output}: {what} would overwrite the input {source}; "
                    "name another output file"
                )
            if _inside(written, Path(source).expanduser()):  # a dataset folder's files
                raise ValueError(
                    f"output {output}: {what} would be written into the input folder {source}; "
                    "name a file outside it"
                )


def _inside(written: Path, source: Path) -> bool:
    """Whether ``written`` lies in the existing folder ``source`` (a dataset directory read as
    a set, whose files it could replace or join)."""
    return source.is_dir() and written.resolve().is_relative_to(source.resolve())


def _same_file(written: Path, source: Path) -> bool:
    """Whether writing ``written`` would replace the existing file ``source`` (links followed)."""
    if not source.is_file():
        return False
    if written.resolve() == source.resolve():
        return True
    return written.exists() and os.path.samefile(written, source)


def write_step(
    kept: list[dict[str, Any]], dropped: list[dict[str, Any]], output: str | Path
) -> StepReport:
    """Write the kept rows to ``output`` and the dropped ones (each ``{"reason": ..., "row": ...,
    ...}``) beside it; returns the :class:`StepReport`. Both or neither: both are written to
    temporary files first and renamed over the outputs only once both are complete (the
    dropped rows first), so a failed write leaves the files an earlier run wrote as they were,
    and an output is never there without its record of what was dropped."""
    audit, output = dropped_file(output), Path(output).expanduser()
    with atomic_path(output) as kept_tmp, atomic_path(audit) as audit_tmp:
        _write_file(dropped, audit_tmp, audit)
        _write_file(kept, kept_tmp, output)
    reasons: dict[str, int] = {}
    for item in dropped:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    return StepReport(len(kept), reasons, output, audit)
