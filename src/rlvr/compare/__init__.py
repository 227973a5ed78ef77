"""``rlvr compare``: run a study (arms x seeds of paper recipes) and test the papers' claims.

::

    from rlvr.compare import load_study, run_study

    result = run_study(load_study("abc"), out="runs/compare")
    result.report.markdown          # runs/compare/abc/report.md
    [(v.claim.id, v.status) for v in result.report.verdicts]

- :mod:`rlvr.compare.study`: study files (base configuration, arms, seeds, steps) and the plan;
- :mod:`rlvr.compare.runner` and :mod:`rlvr.compare.worker`: one process per run, reuse, resume;
- :mod:`rlvr.compare.results`, :mod:`rlvr.compare.stats`: summaries and paired bootstrap intervals;
- :mod:`rlvr.compare.claims`: the papers' claims (``claims/*.yaml``) and the verdict rules;
- :mod:`rlvr.compare.report`, :mod:`rlvr.compare.figures`: ``report.md``, ``report.html``, figures.
"""

from rlvr.compare.run import StudyResult, run_study
from rlvr.compare.study import Arm, RunSpec, Study, bundled_studies, load_study, plan

__all__ = [
    "Arm",
    "RunSpec",
    "Study",
    "StudyResult",
    "bundled_studies",
    "load_study",
    "plan",
    "run_study",
]
