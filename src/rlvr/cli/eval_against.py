"""``rlvr eval --against BASE.json``: the earlier report read and checked before anything
samples, and the paired differences (:mod:`rlvr.evaluation.paired`) as printed and recorded."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rlvr.evaluation.harness import json_numbers
from rlvr.evaluation.paired import (
    Difference,
    arms,
    check_same_scoring,
    compare_reports,
    paired_problems,
    read_report,
    summary,
)


def read_against(path: str | None, output: Path) -> dict | None:
    """The ``--against`` report (``None`` without one); one line when it is no report, or is
    the ``--output`` file this evaluation would write over."""
    if path is None:
        return None
    same = output.exists() and Path(path).exists() and Path(path).samefile(output)
    if same or Path(path).resolve() == output.resolve():  # a link to it too, hard or symbolic
        raise ValueError(
            f"--against {path} is the --output file: this evaluation would write over the "
            "report it compares with; give another --output"
        )
    try:
        return read_report(path)
    except ValueError as err:
        raise ValueError(f"--against {err}{_unwritten(Path(path))}") from None


def _unwritten(path: Path) -> str:
    """Why a run's ``eval_reports/step_N.json`` that is not there was never written (its
    ``config.yaml`` says ``eval.reports: false``), else ``""``."""
    from rlvr.train.overrides import read_yaml

    config = path.parent.parent / "config.yaml"
    if path.exists() or path.parent.name != "eval_reports" or not config.is_file():
        return ""
    try:
        reports = (read_yaml(str(config)).get("eval") or {}).get("reports", True)
    except (ValueError, AttributeError):  # not a run's configuration
        return ""
    if reports is not False:
        return ""
    return (
        f": the run wrote no evaluation reports (eval.reports: false in {config}); for a "
        "base, evaluate the model it started from with rlvr eval --output BASE.json"
    )


def paired(path: str, written: dict, base: dict) -> tuple[dict, list[str]]:
    """The JSON's ``against`` section and the lines printed under the table: for reports of
    the same weights what their difference measures (:meth:`~rlvr.evaluation.paired.Arms.line`),
    then the paired differences over all problems and, with several datasets, over each one's;
    without p-values, and said to be noise, when it is noise alone."""
    overall, datasets = compare_reports(written, base)
    both = arms(written, base)
    section = {
        "file": path,
        "same_weights": both.same_weights,
        "other_settings": {o.setting.name: [o.new, o.base] for o in both.settings},
        "noise_only": both.noise_only,
        "all": _json_differences(overall),
        "per_dataset": {name: _json_differences(ds) for name, ds in datasets.items()},
    }
    tested = not both.noise_only
    what = "" if tested else "; sampling noise, not a finding"
    lines = [] if both.line() is None else [str(both.line())]
    lines.append(
        f"against {path}, paired by problem (percentage points, 95%{what}): "
        + summary(overall, tested)
    )
    if len(datasets) > 1:
        lines += [f"  {name}: {summary(ds, tested)}" for name, ds in datasets.items()]
    return section, lines


def _json_differences(differences: Mapping[str, Difference]) -> dict[str, dict]:
    """Each difference as a JSON object; the interval and p-value one problem leaves undefined
    (NaN) as ``None`` (:func:`~rlvr.evaluation.harness.json_numbers`)."""
    return {key: json_numbers(d._asdict()) for key, d in differences.items()}


def check_against(path: str, base: dict, spec: str, options: dict, examples: list) -> None:
    """Refuse an ``--against`` report of another verifier, or of one whose options decide
    correctness otherwise (``--extract``; :func:`~rlvr.evaluation.paired.check_same_scoring`),
    or of other problems (matched by dataset, id and reference) before anything samples;
    ``spec`` and ``options``: this evaluation's verifier, as its report records it."""
    if base.get("verifier") != spec:
        raise ValueError(
            f"--against {path}: scored with verifier {base.get('verifier')!r}, this with "
            f"{spec!r}: give --verifier {base.get('verifier')} to compare"
        )
    try:
        check_same_scoring({"verifier": spec, "verifier_options": options}, base)
    except ValueError as err:
        raise ValueError(f"--against {path}: {err}: give its --extract to compare") from None
    mine = [{"dataset": ex.dataset, "id": ex.id, "reference": ex.reference} for ex in examples]
    try:
        paired_problems(mine, base["problems"])
    except ValueError as err:
        raise ValueError(f"--against {path}: {err}") from None
