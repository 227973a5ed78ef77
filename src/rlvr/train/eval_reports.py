"""A run's held-out evaluations on disk: ``<run>/eval_reports/step_NNNNNN.json``, one each.

Each file is the JSON report ``rlvr eval`` writes
(:func:`rlvr.evaluation.harness.report_document`, per-problem counts included), so
``rlvr eval --against <run>/eval_reports/step_000000.json`` compares a model with the run's
starting point, and the run's summary gives the held-out change between its first and last
evaluation with a paired interval (:mod:`rlvr.evaluation.paired`). A resume drops the files
after its checkpoint, as it drops the rows of ``metrics.jsonl``; the steps it runs again
write them again. (Not ``evals/``: a study run of ``rlvr compare`` writes its own files there.)
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.atomic import write_json
from rlvr.evaluation.paired import Difference, paired_differences, read_report

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


def paired_change(run_dir: Path, steps: Sequence[int], ks: Sequence[int]) -> dict[str, Difference]:
    """The held-out change from the report of step 0 to that of the last of ``steps``, paired
    by problem (``avg@k`` and ``pass@k`` for each of ``ks``: :func:`paired_differences`);
    empty without step 0 or a later one, or without their files (a run of an older rlvr).
    Reports that cannot be paired (the held-out set changed on a resume) are a warning."""
    steps = sorted(steps)
    if len(steps) < 2 or steps[0] != 0:
        return {}
    first, last = report_file(run_dir, 0), report_file(run_dir, steps[-1])
    if not (first.is_file() and last.is_file()):
        return {}
    try:
        return paired_differences(read_report(last), read_report(first), ks)
    except ValueError as err:
        warnings.warn(
            f"held-out change without its interval: {first.name} and {last.name}: {err}",
            stacklevel=2,
        )
        return {}
