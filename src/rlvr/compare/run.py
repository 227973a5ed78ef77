"""A whole study: plan the runs, execute the missing ones, write the report."""

from __future__ import annotations

import shlex
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlvr.builtins import did_you_mean
from rlvr.compare.claims import load_claims, unmeasured
from rlvr.compare.progress import StudyDisplay
from rlvr.compare.report import ReportFiles, claims_left_out, write_report
from rlvr.compare.runner import (
    RunState,
    default_jobs,
    execute,
    initial_states,
    is_finished,
    worker_env,
)
from rlvr.compare.stats import MIN_SEEDS
from rlvr.compare.study import DEFAULT_REGIME, RunSpec, Study, plan
from rlvr.compare.worker import RUN_FILE, code_hash, module_hashes, read_final
from rlvr.train.metrics import METRICS_FILE, read_metrics

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
    keep_checkpoints: bool = False,
    run: bool = True,
    live: bool | None = None,
    command: str | None = None,
) -> StudyResult:
    """Run ``study``'s missing runs under ``out/runs`` (``jobs`` at a time) and write its report.

    ``report_dir`` defaults to ``out/<study name>``; ``fresh`` deletes the study's runs first;
    a finished run's checkpoints are deleted unless ``keep_checkpoints``; ``run=False`` only
    writes the report from the runs already finished.
    """
    if fresh and not run:
        raise ValueError("fresh=True deletes the study's runs and run=False runs none")
    out = Path(out)
    check_out(out)
    specs = plan(study, out / RUNS_DIR)
    check_claims(study, specs)
    if run:
        check_imports(study)
        check_runs(study, specs, fresh=fresh)
    if run and not fresh and (mixed := mixed_code(specs)):
        warnings.warn(mixed, stacklevel=2)
    if not fresh and (stale := stale_modules(specs)):
        warnings.warn(stale, stacklevel=2)
    check_logged = metric_check(study)
    if run and not fresh:
        check_reused(specs, check_logged)
    states = initial_states(specs, fresh=fresh)
    if not run and not any(state.status == "done" for state in states):
        warnings.warn(
            f"no finished run of study {study.name!r} under {out / RUNS_DIR}: the report has "
            "no numbers (is --out the folder the study ran with?)",
            stacklevel=2,
        )
    if run:
        jobs = jobs or default_jobs(specs[0].config.threads)
        display = StudyDisplay(states, live=live)
        try:
            execute(states, jobs, display, study.imports, keep_checkpoints, check_logged)
        finally:
            display.close(states)
    command = command or shlex.join(
        ["rlvr", "compare", study.source or study.name, *study.overrides, "--out", str(out)]
    )
    report = write_report(
        study, specs, Path(report_dir or out / study.name), command, runs_root=out / RUNS_DIR
    )
    return StudyResult(states, report)


def check_out(out: Path) -> None:
    """Refuse an ``out`` that is itself a folder of runs (``--out OUT/runs``): the study would
    look for its runs under ``OUT/runs/runs``, find none, and make every one again."""
    if out.is_dir() and (found := next(out.glob(f"*/seed*/{RUN_FILE}"), None)):
        raise ValueError(
            f"--out {out} holds run folders itself ({found.parent.relative_to(out)}); runs go to "
            f"OUT/{RUNS_DIR}, so give the folder above it: --out {out.parent}"
        )


def mixed_code(specs: list[RunSpec]) -> str:
    """What is wrong when runs are left to make and some finished runs of ``specs`` were made
    by other rlvr source than this copy's (:func:`rlvr.compare.worker.code_hash`): the study
    would mix code. ``""`` when nothing is."""
    finished = [s for s in specs if is_finished(s)]
    if len(finished) == len(specs):
        return ""
    now = code_hash()
    codes = Counter(read_final(s.run_dir).get("code") for s in finished)
    other = {code: n for code, n in codes.items() if code != now}
    if not other:
        return ""
    made = ", ".join(f"{n} by {code or 'unknown'}" for code, n in other.items())
    return (
        f"{sum(other.values())} of the study's {len(finished)} finished runs were made by other "
        f"rlvr code ({made}) than this copy ({now}), so the {len(specs) - len(finished)} runs "
        "made now would mix code: run from a checkout of the code that made them, or --fresh"
    )


def stale_modules(specs: list[RunSpec]) -> str:
    """What is wrong when finished runs of ``specs`` were made with other source of your
    modules (``imports``, ``objective.name=my_module.name``) than the files now: they are
    reused as they are. ``""`` when none were."""
    finished, stale, modules, gone = [s for s in specs if is_finished(s)], 0, set(), set()
    for spec in finished:
        made = read_final(spec.run_dir).get("modules") or {}
        now = module_hashes(list(made))
        changed = {m for m, h in now.items() if h != made[m]}
        stale, modules = stale + bool(changed), modules | changed
        gone |= {m for m in changed if not now[m]}
    if not stale:
        return ""
    what = f"{', '.join(sorted(modules))} than its file now" + (
        f" ({', '.join(sorted(gone))}: no file now)" if gone else ""
    )
    return (
        f"{stale} of the study's {len(finished)} finished runs were made by other code of "
        f"{what}; they are reused as they are (--fresh runs them again)"
    )


FIND_MODULES = """
import importlib.util, sys
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
print(*[name for name in sys.argv[1:] if not found(name)])
"""


def check_imports(study: Study) -> None:
    """Refuse a study whose ``imports`` a run could not import, before any run starts (each
    run failed on it at its start). Looked up, not imported, by a Python started as a run is."""
    if not study.imports:
        return
    found = subprocess.run(
        [sys.executable, "-c", FIND_MODULES, *study.imports],
        env=worker_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    if missing := found.stdout.split():
        raise ValueError(
            f"study {study.name!r}: imports {', '.join(missing)}, which a run cannot import "
            "(not in the working folder or on PYTHONPATH)"
        )


def check_runs(
    study: Study, specs: list[RunSpec], *, fresh: bool = False, device: bool = True
) -> None:
    """Refuse, before any run starts, an arm whose run would stop at its own start (a model
    or data file that is not there, an unknown verifier: :func:`~rlvr.train.preflight.preflight`);
    every seed of it failed in turn. Only arms with runs to make are checked (all with
    ``fresh``). ``device=False`` for a dry run, as ``rlvr train``'s. A verifier one of the
    study's ``imports`` registers is found: reading the arms imported them."""
    from rlvr.train.preflight import preflight

    checked = set()
    for spec in specs if fresh else [s for s in specs if not is_finished(s)]:
        if (spec.arm.name, spec.regime) not in checked:  # seeds differ only in the seed
            checked.add((spec.arm.name, spec.regime))
            try:
                preflight(spec.config, device=device)
            except ValueError as err:
                where = "" if spec.regime == DEFAULT_REGIME else f" [{spec.regime}]"
                raise ValueError(f"arm {spec.arm.name}{where}: {err}") from None


def check_claims(study: Study, specs: list[RunSpec]) -> None:
    """Refuse a study whose runs cannot log a held-out metric one of its claims reads
    (``eval/pass@4`` with ``eval.n=2``, or no evaluation after step 0), before any run starts:
    the claim would compare missing means or the untrained model's scores."""
    configs = {spec.arm.name: spec.config for spec in specs}
    for regime in study.regime_list if study.claims else ():
        if len(seeds := regime.seeds or study.seeds) < MIN_SEEDS:
            where = f" regime {regime.name!r}" if study.regimes else ""
            warnings.warn(
                f"study {study.name!r}{where} has {len(seeds)} seed: no claim can be judged (a "
                f"paired interval needs {MIN_SEEDS}); give more, e.g. seeds=[0,1,2,3,4,5,6]",
                stacklevel=2,
            )
    if left_out := claims_left_out(study):
        warnings.warn(f"study {study.name!r}: {left_out}", stacklevel=2)
    for name in study.claims:
        for claim in load_claims(name):
            problems = unmeasured(claim, configs)
            if problems:
                raise ValueError(
                    f"study {study.name!r}: claim {claim.id} cannot be judged: {'; '.join(problems)}"
                )


def check_reused(specs: list[RunSpec], check: Callable[[RunSpec], None]) -> None:
    """``check`` (:func:`metric_check`) each finished run of ``specs`` when some run is left to
    make (with none left, the report names a metric no run logged)."""
    if not all(map(is_finished, specs)):
        for spec in filter(is_finished, specs):
            check(spec)


def metric_check(study: Study) -> Callable[[RunSpec], None]:
    """A check of a finished run: ``ValueError`` when it did not log a metric that a claim reads
    of its arm (a misspelt name), naming the claim, the metric and the nearest logged name.

    Metric names are not known before a run: each objective logs its own. A claim cannot be
    judged when one run of its arms never logged its metric (that seed has no value), so the
    first finished run of each arm (and regime) decides, before the remaining runs. A run
    whose every update was skipped logged no update metric and decides nothing."""
    reads: dict[str, list[tuple[str, str]]] = {}
    for name in study.claims:
        for claim in load_claims(name):
            for arm, metric in dict.fromkeys(claim.reads):
                reads.setdefault(arm, []).append((claim.id, metric))
    checked: set[tuple[str, str]] = set()

    def check(spec: RunSpec) -> None:
        if (spec.arm.name, spec.regime) in checked or spec.arm.name not in reads:
            return
        metrics = spec.run_dir / METRICS_FILE
        rows = read_metrics(metrics) if is_finished(spec) and metrics.is_file() else []
        if not any(row.get("update/skipped") == 0 for row in rows):
            return
        checked.add((spec.arm.name, spec.regime))
        logged = {key for row in rows for key in row} - {"step"}
        for claim_id, metric in reads[spec.arm.name]:
            if metric not in logged:
                raise ValueError(
                    f"study {study.name!r}: claim {claim_id} reads {metric}, which the finished "
                    f"run {spec.key} did not log{did_you_mean(metric, logged)}; fix the claim "
                    "and run again (finished runs are kept and reused)"
                )

    return check
