"""A whole study: plan the runs, execute the missing ones, write the report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlvr.compare.progress import StudyDisplay
from rlvr.compare.report import ReportFiles, write_report
from rlvr.compare.runner import RunState, default_jobs, execute, initial_states
from rlvr.compare.study import Study, plan

RUNS_DIR = "runs"


@dataclass(frozen=True)
class StudyResult:
    """The runs' final states and the report written from them."""

    states: list[RunState]
    report: ReportFiles

    @property
    def failed(self) -> list[RunState]:
        return [s for s in self.states if s.status == "failed"]


def run_study(
    study: Study,
    out: str | Path = "runs/compare",
    *,
    report_dir: str | Path | None = None,
    jobs: int | None = None,
    fresh: bool = False,
    run: bool = True,
    live: bool | None = None,
    command: str | None = None,
) -> StudyResult:
    """Run ``study``'s missing runs under ``out/runs`` (``jobs`` at a time) and write its report.

    ``report_dir`` defaults to ``out/<study name>``; ``fresh`` deletes the study's runs first;
    ``run=False`` only writes the report from the runs already finished.
    """
    out = Path(out)
    specs = plan(study, out / RUNS_DIR)
    states = initial_states(specs, fresh=fresh)
    if run:
        jobs = jobs or default_jobs(specs[0].config.threads)
        display = StudyDisplay(states, live=live)
        try:
            execute(states, jobs, display, study.imports)
        finally:
            display.close(states)
    command = command or f"rlvr compare {study.source or study.name} --out {out}"
    report = write_report(study, specs, Path(report_dir or out / study.name), command)
    return StudyResult(states, report)
