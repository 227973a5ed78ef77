"""``rlvr compare``: run a study (arms x seeds of paper recipes) and test the papers' claims.

::

    from rlvr.compare import load_study, run_study

    result = run_study(load_study("abc"), out="runs/compare")
    result.report.markdown          # runs/compare/abc/report.md
    [(v.claim.id, v.status) for v in result.report.verdicts]

- :mod:`rlvr.compare.study`: study files (base configuration, arms, seeds, steps) and the plan;
- :mod:`rlvr.compare.runner` and :mod:`rlvr.compare.worker`: one process per run, reuse, resume;
- :mod:`rlvr.compare.results`, :mod:`rlvr.compare.stats`: summaries and paired t intervals;
- :mod:`rlvr.compare.claims`: the papers' claims (``claims/*.yaml``) and the verdict rules;
- :mod:`rlvr.compare.report`, :mod:`rlvr.compare.figures`: ``report.md``, ``report.html``, figures.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use, so a run's worker process (``python -m rlvr.compare.worker``) loads
# neither the report nor matplotlib.
_LAZY = {
    "StudyResult": "rlvr.compare.run",
    "run_study": "rlvr.compare.run",
    "Arm": "rlvr.compare.study",
    "RunSpec": "rlvr.compare.study",
    "Study": "rlvr.compare.study",
    "bundled_studies": "rlvr.compare.study",
    "load_study": "rlvr.compare.study",
    "plan": "rlvr.compare.study",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlvr.compare' has no attribute {name!r}")
