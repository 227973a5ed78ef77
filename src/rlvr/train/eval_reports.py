"""A run's held-out evaluations on disk: ``<run>/eval_reports/step_NNNNNN.json``, one each.

Each file is the JSON report ``rlvr eval`` writes
(:func:`rlvr.evaluation.harness.report_document`, per-problem counts included), so
``rlvr eval --against <run>/eval_reports/step_000000.json`` compares a model with the run's
starting point. A resume drops the files after its checkpoint, as it drops the rows of
``metrics.jsonl``; the steps it runs again write them again. (Not ``evals/``: a study run of
``rlvr compare`` writes its own files there.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.atomic import write_json

REPORTS_DIR = "eval_reports"


def report_file(run_dir: Path, step: int) -> Path:
    """Where the report of the evaluation after ``step`` (0: before training) is written."""
    return Path(run_dir) / REPORTS_DIR / f"step_{step:06d}.json"


def write_report(run_dir: Path, step: int, document: Mapping[str, Any]) -> Path:
    """Write ``document`` (an evaluation's JSON report) for ``step``, atomically; its path."""
    path = report_file(run_dir, step)
    write_json(path, dict(document))
    return path


def drop_reports_after(run_dir: Path, step: int) -> None:
    """Remove the reports of steps after ``step`` (a resume from it runs them again)."""
    folder = Path(run_dir) / REPORTS_DIR
    for path in folder.glob("step_*.json") if folder.is_dir() else ():
        found = re.fullmatch(r"step_(\d+)\.json", path.name)
        if found and int(found.group(1)) > step:
            path.unlink()
