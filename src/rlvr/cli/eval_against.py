"""``rlvr eval --against BASE.json``: the earlier report read and checked before anything
samples, and the paired differences (:mod:`rlvr.evaluation.paired`) as printed and recorded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlvr.evaluation.filtering import verifier_settings
from rlvr.evaluation.paired import (
    paired_differences,
    paired_problems,
    per_dataset_differences,
    read_report,
    summary,
)
from rlvr.rewards.registry import get_verifier

if TYPE_CHECKING:
    from rlvr.rewards.verifier import Verifier


def read_against(path: str | None, output: Path) -> dict | None:
    """The ``--against`` report (``None`` without one); one line when it is no report, or is
    the ``--output`` file this evaluation would write over."""
    if path is None:
        return None
    if Path(path).resolve() == output.resolve():
        raise ValueError(
            f"--against {path} is the --output file: this evaluation would write over the "
            "report it compares with; give another --output"
        )
    try:
        return read_report(path)
    except ValueError as err:
        raise ValueError(f"--against {err}") from None


def paired(path: str, written: dict, base: dict) -> tuple[dict, list[str]]:
    """The JSON's ``against`` section and the lines printed under the table: the paired
    differences over all problems and, with several datasets, over each one's."""
    overall = paired_differences(written, base)
    datasets = per_dataset_differences(written, base)
    section = {
        "file": path,
        "all": {k: d._asdict() for k, d in overall.items()},
        "per_dataset": {n: {k: d._asdict() for k, d in ds.items()} for n, ds in datasets.items()},
    }
    lines = [f"against {path}, paired by problem (percentage points, 95%): {summary(overall)}"]
    if len(datasets) > 1:
        lines += [f"  {name}: {summary(ds)}" for name, ds in datasets.items()]
    return section, lines


def check_against(path: str, base: dict, verifier: Verifier, examples: list) -> None:
    """Refuse an ``--against`` report of another verifier, or of one whose options decide
    correctness otherwise (``--extract``), or of other problems (matched by dataset, id and
    reference) before anything samples."""
    spec = verifier.spec
    if base.get("verifier") != spec:
        raise ValueError(
            f"--against {path}: scored with verifier {base.get('verifier')!r}, this with "
            f"{spec!r}: give --verifier {base.get('verifier')} to compare"
        )
    options = base.get("verifier_options") or {}
    try:
        theirs = _deciding(verifier_settings(get_verifier(spec, **options)))
    except (TypeError, ValueError) as err:
        raise ValueError(f"--against {path}: its verifier_options {options}: {err}") from None
    if theirs != _deciding(verifier_settings(verifier)):
        raise ValueError(
            f"--against {path}: scored with verifier options {options}, this with "
            f"{dict(verifier.options)}, which decide correctness otherwise: give its --extract "
            "to compare"
        )
    mine = [{"dataset": ex.dataset, "id": ex.id, "reference": ex.reference} for ex in examples]
    try:
        paired_problems(mine, base["problems"])
    except ValueError as err:
        raise ValueError(f"--against {path}: {err}") from None


def _deciding(settings: dict) -> dict:
    """A verifier's settings (:func:`~rlvr.evaluation.filtering.verifier_settings`) without
    its scores ``correct`` and ``wrong`` at any level: they scale scores, while avg@k and
    pass@k count the completions that reach ``correct``."""
    options = {
        key: _deciding(value) if isinstance(value, dict) and "spec" in value else value
        for key, value in settings["options"].items()
        if key not in ("correct", "wrong")
    }
    return {"spec": settings["spec"], "options": options}
