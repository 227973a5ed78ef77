"""``rlvr compare``: run a study's arms x seeds and write a report that tests the papers' claims."""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from pathlib import Path

from rlvr.cli.common import check_folder, command, warn_repeated_keys


def _parser(studies: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlvr compare",
        description="Run every arm x seed of a study (in parallel, reusing finished runs and "
        "resuming killed ones) and write report.md / report.html with curves, final scores, "
        "paired t intervals and each paper claim's verdict.",
        epilog="example: rlvr compare abc --jobs 2   |   rlvr compare abc seeds=[0,1,2,3,4,5,6] "
        "steps=20   |   rlvr compare evidence --report-dir docs/studies/evidence",
    )
    add = parser.add_argument
    add("study", nargs="?", help=f"bundled study ({', '.join(studies)}) or a YAML file")
    add(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="changes to the study file's keys: seeds=[0,1,2,3], steps=20, settings.optim.lr=2e-3",
    )
    add("--out", default="runs/compare", help="runs go to OUT/runs, the report to OUT/STUDY")
    add("--report-dir", help="write the report here instead of OUT/STUDY")
    add("--jobs", type=int, help="parallel runs (default: CPU cores // the runs' threads)")
    add("--fresh", action="store_true", help="delete the study's runs and run them again")
    add(
        "--keep-checkpoints",
        action="store_true",
        help="keep a finished run's checkpoints (deleted by default: the report does not read them)",
    )
    add("--report-only", action="store_true", help="write the report from finished runs only")
    add("--dry-run", action="store_true", help="list the runs and what would be done with each")
    add("--list", action="store_true", help="list the bundled studies")
    return parser


def _list(names: list[str]) -> None:
    from rlvr.compare import load_study

    width = max(map(len, names), default=0)
    for name in names:
        study = load_study(name)
        size = f"{len(study.arms)} arms x {len(study.seeds)} seeds, {study.steps} steps"
        print(f"{name:<{width}}  {size}: {study.title}")


def _dry_run(study, out: str, fresh: bool) -> None:
    from rlvr.compare import plan
    from rlvr.compare.run import (
        check_claims,
        check_imports,
        check_out,
        check_reused,
        check_runs,
        metric_check,
        mixed_code,
        stale_modules,
    )
    from rlvr.compare.runner import is_finished

    check_out(Path(out))
    specs = plan(study, Path(out) / "runs")
    check_claims(study, specs)
    check_imports(study)
    check_runs(study, specs, fresh=fresh, device=False)
    if not fresh:
        check_reused(specs, metric_check(study))
    for spec in specs:
        what = "reuse" if is_finished(spec) else "resume" if spec.run_dir.exists() else "run"
        print(f"{'run' if fresh else what:<7} {spec.key:<34} {spec.run_dir}")
    if not fresh and (mixed := mixed_code(specs)):
        warnings.warn(mixed, stacklevel=2)
    if not fresh and (stale := stale_modules(specs)):
        warnings.warn(stale, stacklevel=2)


@command
def main(argv: list[str]) -> int:
    """``rlvr compare STUDY [key=value ...] [--out DIR] [--report-dir DIR] [--jobs N] [--fresh]
    [--keep-checkpoints] [--report-only]``."""
    from rlvr.compare import bundled_studies, load_study, run_study
    from rlvr.compare.multiplicity import p_text

    args = _parser(bundled_studies()).parse_intermixed_args(argv)
    warn_repeated_keys(args.overrides)
    if args.list or not args.study:
        _list(bundled_studies())
        return 0
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    check_folder(args.out, "--out")
    if args.report_dir is not None:  # checked now, not when the report is written after the runs
        check_folder(args.report_dir, "--report-dir")
    if args.fresh and args.report_only:
        raise ValueError("--fresh deletes the study's runs and --report-only runs none: use one")
    studies = [o for o in args.overrides if "=" not in o and o in bundled_studies()]
    if studies:  # else: "override 'etr' must look like section.key=value"
        raise ValueError(f"one study per command: run rlvr compare {studies[0]} on its own")
    study = load_study(args.study, args.overrides)
    if args.dry_run:
        _dry_run(study, args.out, args.fresh)
        return 0
    # the command that reproduces the report (flags that only choose what to redo are left out)
    kept = [a for a in argv if a not in ("--report-only", "--fresh", "--keep-checkpoints")]
    try:
        result = run_study(
            study,
            args.out,
            report_dir=args.report_dir,
            jobs=args.jobs,
            fresh=args.fresh,
            keep_checkpoints=args.keep_checkpoints,
            run=not args.report_only,
            command=shlex.join(["rlvr", "compare", *kept]),
        )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the runs stopped with their checkpoints
        again = shlex.join(["rlvr", "compare", *(a for a in argv if a != "--fresh")])
        print(f"to continue: {again}", file=sys.stderr)
        raise
    for v in result.report.verdicts:
        holm = "" if v.p_holm is None else f"Holm p {p_text(v.p_holm)}; "
        role = f"{v.role}; " if v.role else ""
        claim = f"{v.claim.id} [{v.regime}]" if study.regimes else v.claim.id
        print(f"{v.status:<15} {claim:<22} {role}{holm}{v.numbers}")
    print(f"report: {result.report.markdown}  {result.report.html}  {result.report.runs}")
    for state in result.failed:
        why = f": {state.last_log_line}" if state.last_log_line else ""
        print(f"failed: {state.spec.key}{why} (log: {state.log})")
    return 1 if result.failed else 0
