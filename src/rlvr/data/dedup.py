"""Exact deduplication of prompts, on their normalised text (:func:`rlvr.data.text.normalized`).

A row is dropped when its normalised prompt equals an earlier row's (``duplicate``; the
first occurrence is kept) or is empty (``empty``: nothing but whitespace and punctuation).
Two prompts that differ only in whitespace, case, LaTeX spacing or punctuation are
duplicates; ones that differ in any word, number or symbol are not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.data.loading import Row
from rlvr.data.rowfiles import (
    StepReport,
    check_step_output,
    prompt_field,
    read_rows,
    row_prompts,
    write_step,
)
from rlvr.data.text import normalized


def dedup_rows(
    rows: list[Row], prompts: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept rows, dropped)``; each dropped item is ``{"reason", "duplicate_of", "row"}``
    (``duplicate_of``: where the kept first occurrence is, ``None`` for an empty prompt)."""
    first: dict[str, str] = {}
    kept, dropped = [], []
    for (where, row), prompt in zip(rows, prompts, strict=True):
        key = normalized(prompt)
        if not key:
            dropped.append({"reason": "empty", "duplicate_of": None, "where": where, "row": row})
        elif key in first:
            dropped.append(
                {"reason": "duplicate", "duplicate_of": first[key], "where": where, "row": row}
            )
        else:
            first[key] = where
            kept.append(row)
    return kept, dropped


def dedup_file(source: str | Path, output: str | Path, *, field: str | None = None) -> StepReport:
    """Deduplicate ``source`` into ``output``; the dropped rows go to ``<stem>.dropped.jsonl``."""
    check_step_output(output, [source])
    rows = read_rows(source)
    kept, dropped = dedup_rows(rows, row_prompts(rows, prompt_field(rows, field)))
    return write_step(kept, dropped, output)
