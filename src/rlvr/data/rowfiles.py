"""Prompt files as rows: read a JSONL/Parquet file whole, find its prompt field, write rows back.

The data-cleaning steps (``rlvr data dedup``, ``decontaminate``, ``filter``) keep or drop
whole rows and write the kept ones unchanged, so they work on rows rather than on
:class:`~rlvr.data.loading.Example` s. The prompt field is the one named (``--field``, or a
mapping's ``prompt`` in :data:`~rlvr.data.fields.FIELD_MAPS`), else the first of
:data:`PROMPT_FIELDS` that the first row has.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.fields import FIELD_MAPS
from rlvr.data.loading import Row, get_path, read_jsonl, read_parquet
from rlvr.data.text import prompt_text

PROMPT_FIELDS = ("prompt", "question", "problem", "text")
"""Fields tried, in order, when no prompt field is named."""


def read_rows(path: str | Path) -> list[Row]:
    """``(where, row)`` of every row of a ``.jsonl`` / ``.json`` / ``.parquet`` file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    rows = list(read_parquet(path) if path.suffix == ".parquet" else read_jsonl(path))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def prompt_field(rows: list[Row], field: str | None = None) -> str:
    """The prompt field: ``field`` (a field path or a mapping name), else the first of
    :data:`PROMPT_FIELDS` the first row has."""
    if field is not None:
        return FIELD_MAPS[field].prompt if field in FIELD_MAPS else field
    where, first = rows[0]
    found = next((name for name in PROMPT_FIELDS if name in first), None)
    if found is None:
        raise ValueError(
            f"{where}: no prompt field ({', '.join(PROMPT_FIELDS)}); name it with --field"
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
    """Write ``rows`` to JSONL (or Parquet for a ``.parquet`` path) atomically; returns the count."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), tmp)
    else:
        with tmp.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    os.replace(tmp, path)
    return len(rows)


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

    def summary(self) -> str:
        """One line: ``kept 90 of 100 (dropped 7 duplicate, 3 contaminated) -> out.jsonl``."""
        total = self.kept + sum(self.dropped.values())
        reasons = ", ".join(f"{n} {why}" for why, n in self.dropped.items() if n)
        return f"kept {self.kept} of {total} (dropped {reasons or 'none'}) -> {self.output}"


def dropped_file(output: str | Path) -> Path:
    """Where the dropped rows of a step writing ``output`` go: ``<stem>.dropped.jsonl`` beside it."""
    output = Path(output).expanduser()
    return output.with_name(f"{output.stem}.dropped.jsonl")


def write_step(
    kept: list[dict[str, Any]], dropped: list[dict[str, Any]], output: str | Path
) -> StepReport:
    """Write the kept rows to ``output`` and the dropped ones (each ``{"reason": ..., "row": ...,
    ...}``) beside it; returns the :class:`StepReport`."""
    write_rows(kept, output)
    audit = dropped_file(output)
    write_rows(dropped, audit)
    reasons: dict[str, int] = {}
    for item in dropped:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    return StepReport(len(kept), reasons, Path(output).expanduser(), audit)
