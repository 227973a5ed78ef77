"""PNG curves of one or more runs' ``metrics.jsonl`` (``rlvr plot``).

One figure per panel (reward, entropy, clip fractions, quadrant shares, the objective
contrast, response length, held-out scores), and one per prefix of the objectives' own
metrics (``objective-etr.png`` for ``etr/*``, ``objective-mine.png`` for a registered
objective's ``mine/*``: every metric under a prefix rlvr does not log itself, one axes each),
one line per run and metric: with several
runs each run has one colour and each metric one line style, and the legend sits beside
the axes. Panels whose metrics no run logged are skipped. A step whose value was not finite
(``null`` in ``metrics.jsonl``) breaks the line there and is marked by a dotted vertical
line; the legend counts such steps. A step without out-of-band events (its four quadrant
shares logged as 0) has no quadrant shares: their lines join the steps around it.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

from rlvr.train.metrics import METRICS_FILE, read_metrics

STYLES = ("-", "--", ":", "-.")
"""Line styles of a panel's metrics, in the panel's order."""

QUADRANT_SHARES = ("clip/q1_share", "clip/q2_share", "clip/q3_share", "clip/q4_share")

# panel file name -> (title, y-axis label, metric names or regular expressions)
PANELS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "reward": (
        "Reward",
        "reward; share of correct completions",
        ("reward/mean", "reward/accuracy"),
    ),
    "entropy": ("Policy entropy", "nats per response token", ("policy/entropy",)),
    "clip": (
        "Clip fractions",
        "share of response tokens",
        ("clip/frac", "clip/low_frac", "clip/high_frac"),
    ),
    "quadrants": (
        "Out-of-band quadrant shares",
        "share of out-of-band events",
        QUADRANT_SHARES,
    ),
    "contrast": (
        "Where another objective's update differs (log.contrast)",
        "share of response tokens",
        (r"contrast/.+/token_frac",),
    ),
    "length": ("Response length", "tokens", ("response/length_mean", "response/length_max")),
    "eval": ("Held-out", "mean over held-out problems", (r"eval/(avg|pass)@\d+",)),
    "sft": ("SFT loss", "NLL per response token (nats)", ("sft/loss", "sft/eval_loss")),
}

RLVR_PREFIXES = frozenset(
    [
        "batch",
        "clip",
        "contrast",
        "data",
        "decoupled",
        "eval",
        "groups",
        "kl",
        "log",
        "loss",
        "optim",
        "perf",
        "policy",
        "ratio",
        "response",
        "reward",
        "rollout",
        "sampling",
        "sandbox",
        "sft",
        "time",
        "update",
        "verifier",
    ]
)
"""First parts of the names of the metrics rlvr logs itself (docs/metrics.md); a metric under
any other is an objective's own (``etr/eps_mean``, ``apmpo/p``, ``mine/width``)."""


def objective_metrics(rows: list[dict]) -> dict[str, list[str]]:
    """``{prefix: names}`` of the objectives' own metrics in ``rows`` (``prefix/name``), sorted."""
    groups: dict[str, list[str]] = {}
    for name in sorted({k for row in rows for k in row if "/" in k}):
        prefix = name.split("/", 1)[0]
        if prefix not in RLVR_PREFIXES:
            groups.setdefault(prefix, []).append(name)
    return groups


def load_runs(paths: Sequence[str]) -> dict[str, list[dict]]:
    """``{label: rows}`` for run directories or ``metrics.jsonl`` files."""
    files = []
    for raw in paths:
        path = Path(raw)
        file = path / METRICS_FILE if path.is_dir() else path
        if not file.is_file():
            raise ValueError(f"{raw}: no {METRICS_FILE} found")
        files.append(file)
    runs = {}
    for raw, file, label in zip(paths, files, _labels(files), strict=True):
        while label in runs:  # the same run twice
            label += "'"
        unread: list[int] = []
        rows = read_metrics(file, unread)
        if (rows or unread) and not any(isinstance(row, dict) for row in rows):
            raise ValueError(  # config.yaml, an eval report: no metrics file at all
                f"{raw}: not a {METRICS_FILE} (none of its lines is a JSON row); give a run's "
                f"directory or its {METRICS_FILE}"
            )
        runs[label] = _checked(raw, rows)
        if unread:
            lines = ", ".join(map(str, unread[:5])) + (", ..." if len(unread) > 5 else "")
            warnings.warn(
                f"{file}: {len(unread)} line(s) not JSON (line {lines}), left out of the plots",
                stacklevel=2,
            )
    return runs


def _labels(files: Sequence[Path]) -> list[str]:
    """Each run's folder (or file stem), with as many parent folders as tell the runs apart:
    ``grpo/seed0`` and ``abc_grpo/seed0``, where the folder names alone are equal."""
    named = [(f.parent if f.name == METRICS_FILE else f.with_suffix("")).resolve() for f in files]
    for depth in range(1, max(len(n.parts) for n in named) + 1):
        labels = ["/".join(n.parts[-depth:]) for n in named]
        if len(set(labels)) == len(set(named)):
            break
    return labels


def _checked(source: str, rows: list) -> list[dict]:
    """``rows``, or a ``ValueError`` naming the first row the panels cannot draw: no JSON
    object, a plotted metric without a whole-number ``step``, or one that is no number."""
    plotted = re.compile("|".join(f"(?:{p})" for _, _, names in PANELS.values() for p in names))
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{source}: row {i} is a {type(row).__name__}, not a JSON object")
        step, own = (
            row.get("step"),
            {n for names in objective_metrics([row]).values() for n in names},
        )
        for name in (n for n in row if plotted.fullmatch(n) or n in own):
            if not isinstance(step, int) or isinstance(step, bool):
                raise ValueError(f'{source}: row {i} has {name} but no whole-number "step"')
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
                raise ValueError(f"{source}: row {i}: {name} is {value!r}, not a number")
    return rows


def _names(patterns: Sequence[str], rows: list[dict]) -> list[str]:
    present = sorted({k for row in rows for k in row if k != "step"})
    return [n for p in patterns for n in present if re.fullmatch(p, n)]


def _series(rows: list[dict], name: str) -> tuple[list[int], list[float], list[int]]:
    """Steps and values of ``name`` where it was logged (``null`` as NaN), and the null steps."""
    logged = [(r["step"], r[name]) for r in rows if name in r]
    steps = [s for s, _ in logged]
    values = [math.nan if v is None else float(v) for _, v in logged]
    return steps, values, [s for s, v in logged if v is None]


def _without_empty_shares(row: dict) -> dict:
    """``row`` without its quadrant shares when they are all 0: a step without out-of-band
    events, whose shares are undefined (the line joins the steps that had events)."""
    if all(row.get(name) == 0 for name in QUADRANT_SHARES):
        return {k: v for k, v in row.items() if k not in QUADRANT_SHARES}
    return row


def plot_runs(runs: dict[str, list[dict]], out_dir: Path) -> list[Path]:
    """Write one PNG per panel that has data; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out_dir.mkdir(parents=True, exist_ok=True)
    runs = {label: [_without_empty_shares(row) for row in rows] for label, rows in runs.items()}
    written = []
    for panel, (title, ylabel, patterns) in PANELS.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        if _draw_panel(ax, runs, patterns):
            ax.set(title=title, xlabel="step", ylabel=ylabel)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # no 1.5
            ax.grid(alpha=0.3)
            _legend(ax, several=len(runs) > 1)
            fig.savefig(out_dir / f"{panel}.png", dpi=120, bbox_inches="tight")
            written.append(out_dir / f"{panel}.png")
        plt.close(fig)
    for prefix, names in objective_metrics([r for rows in runs.values() for r in rows]).items():
        written.append(_objective_figure(plt, runs, prefix, names, out_dir))
    return written


def _objective_figure(plt, runs: dict[str, list[dict]], prefix: str, names, out_dir) -> Path:
    """One figure of the metrics under ``prefix``, one axes per metric (their scales differ:
    ``apmpo/p`` against ``apmpo/eps_ada``); written as ``objective-<prefix>.png``."""
    from matplotlib.ticker import MaxNLocator

    cols = min(len(names), 2)
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(6.4 * cols, 4.0 * rows), squeeze=False, layout="constrained"
    )
    for ax, name in zip(axes.flat, names, strict=False):
        _draw_panel(ax, runs, (re.escape(name),))
        ax.set(title=name, xlabel="step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.grid(alpha=0.3)
        if ax.get_lines():
            _legend(ax, several=len(runs) > 1)
    for ax in axes.flat[len(names) :]:
        ax.set_axis_off()
    fig.suptitle(f"The objective's own metrics: {prefix}/*")
    path = out_dir / f"objective-{re.sub(r'[^A-Za-z0-9_.-]', '_', prefix)}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _draw_panel(ax, runs: dict[str, list[dict]], patterns: Sequence[str]) -> int:
    """Draw every run's metrics of one panel; returns the number of lines drawn. With several
    runs a run keeps one colour and a metric one line style, so both read at a glance."""
    names = _names(patterns, [row for rows in runs.values() for row in rows])
    lines = 0
    for r, (label, rows) in enumerate(runs.items()):
        for name in _names(patterns, rows):
            xs, ys, gaps = _series(rows, name)
            if len(gaps) == len(xs):
                continue
            text = f"{label}: {name}" if len(runs) > 1 else name
            if gaps:
                text += f" ({len(gaps)} non-finite step{'s' * (len(gaps) > 1)}: dotted)"
            i = names.index(name)
            colour = _colour(r, len(runs)) if len(runs) > 1 else f"C{i % 10}"
            style = STYLES[i % len(STYLES)]
            marker = "." if len(xs) < 30 else None
            ax.plot(xs, ys, style, color=colour, marker=marker, label=text)
            for step in gaps:
                ax.axvline(step, color=colour, ls=":", lw=0.8)
            lines += 1
    return lines


def _colour(run: int, runs: int):
    """The colour of the ``run``-th of ``runs``: the default cycle's up to ten runs, else as
    many steps along a colour map (the cycle would repeat)."""
    import matplotlib

    return f"C{run}" if runs <= 10 else matplotlib.colormaps["turbo"](run / (runs - 1))


def _legend(ax, *, several: bool) -> None:
    """The legend: inside the axes for one run, beside them for several (it would cover
    their curves)."""
    if several:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.legend(fontsize=7)
