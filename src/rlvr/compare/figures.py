"""The study's figures: curves with the mean and a band over seeds, and quadrant shares.

Training curves are smoothed per run with a trailing mean over a twentieth of the run's steps
(:func:`smooth_window`: none under 40 steps, 5 over 100) before the mean and the band (minimum
to maximum over seeds) are taken; held-out curves (steps where the evaluation ran) are not
smoothed. A step is drawn where at least half of an arm's runs logged the metric (a step
without an update logs no entropy), as the mean over those runs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rlvr.compare.results import ArmData  # noqa: E402

SMOOTH_FRACTION = 20
CURVES = (
    ("reward/accuracy", "training accuracy"),
    ("eval/avg@*", "held-out avg@k"),
    ("eval/pass@*", "held-out pass@k"),
    ("policy/entropy", "entropy"),
    ("clip/low_frac", "clip fraction, lower bound"),
    ("clip/high_frac", "clip fraction, upper bound"),
    ("response/length_mean", "response length (tokens)"),
    ("optim/grad_norm", "gradient norm"),
    ("eval/diversity/self_bleu", "held-out self-BLEU"),
    ("etr/eps_mean", "ETR eps (mean)"),
    ("apmpo/p", "APMPO p"),
    ("pmpo/p", "PMPO p"),
    ("apmpo/eps_ada", "APMPO eps_ada"),
)
QUADRANT_COLORS = ("#4c72b0", "#8fb0d9", "#dd8452", "#c44e52")


def resolve(pattern: str, arms: list[ArmData]) -> str | None:
    """``eval/avg@*``: the logged ``eval/avg@k`` with the largest k; other names as they are."""
    keys = {k for a in arms for r in a.runs.values() for row in r.rows for k in row}
    if not pattern.endswith("*"):
        return pattern if pattern in keys else None
    stem = pattern[:-1]
    found = [k for k in keys if k.startswith(stem) and k[len(stem) :].isdigit()]
    return max(found, key=lambda k: int(k[len(stem) :])) if found else None


def smooth_window(steps: int) -> int:
    """Trailing-mean window for runs of ``steps`` steps: a twentieth of them, at least 1 (a
    short run's curve is drawn as logged: 5 of 6 steps would hide its shape)."""
    return max(1, steps // SMOOTH_FRACTION)


def smoothed(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` points (fewer at the start).

    >>> smoothed(np.array([1.0, 3.0, 5.0]), 2).tolist()
    [1.0, 2.0, 4.0]
    """
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    lo = np.maximum(idx - window, 0)
    return (cumsum[idx] - cumsum[lo]) / (idx - lo)


def band(
    arm: ArmData, metric: str, window: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(steps, mean, low, high)`` over the arm's seeds, on the steps at least half of its
    runs logged (each run's training curve first smoothed over ``window`` steps)."""
    curves = [run.curve(metric) for run in arm.runs.values()]
    curves = [c for c in curves if c[0].size]
    counts = Counter(x for steps, _ in curves for x in steps.tolist())
    steps = sorted(x for x, n in counts.items() if 2 * n >= len(curves))
    if not steps:
        return None
    column = {x: k for k, x in enumerate(steps)}
    stack = np.full((len(curves), len(steps)), np.nan)
    for row, (run_steps, values) in enumerate(curves):
        if window > 1 and not metric.startswith("eval/"):
            values = smoothed(values, window)
        for x, value in zip(run_steps.tolist(), values, strict=True):
            if x in column:
                stack[row, column[x]] = value
    return np.asarray(steps), np.nanmean(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0)


def _draw_band(ax, data: tuple, color: str, label: str, slot: float) -> None:
    """The mean as a line with its min-max band; a metric logged at one step only (a held-out
    score after the last step) as a point with its min-max range, shifted by ``slot`` tenths of
    a step so that the arms' points stand side by side."""
    steps, mean, low, high = data
    if len(steps) > 1:
        ax.plot(steps, mean, color=color, label=label, lw=1.5)
        ax.fill_between(steps, low, high, color=color, alpha=0.18, lw=0)
        return
    spread = [mean - low, high - mean]
    ax.errorbar(steps + 0.1 * slot, mean, yerr=spread, fmt="o", color=color, label=label, capsize=3)


def curves_figure(
    title: str, arms: list[ArmData], labels: dict[str, str], path: Path
) -> Path | None:
    """A grid of the group's curves (one panel per metric logged, one line per arm)."""
    metrics = [(m, label) for pattern, label in CURVES if (m := resolve(pattern, arms))]
    if not metrics:
        return None
    window = smooth_window(
        max(int(r["step"]) for a in arms for run in a.runs.values() for r in run.rows)
    )
    cols = 3
    rows = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.9 * rows), squeeze=False)
    for ax, (metric, label) in zip(axes.flat, metrics, strict=False):
        for i, arm in enumerate(arms):
            data = band(arm, metric, window)
            if data is None:
                continue
            _draw_band(ax, data, f"C{i}", labels.get(arm.name, arm.name), i - (len(arms) - 1) / 2)
        ax.set_title(f"{label}\n{metric}", fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # no step 5.96
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), fontsize=8)
    smoothing = f"; training curves a trailing mean over {window} steps" if window > 1 else ""
    fig.suptitle(f"{title}: mean over seeds, band min-max{smoothing}", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.02 * (len(names) > 4), 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def quadrant_figure(
    title: str, arms: list[ArmData], labels: dict[str, str], path: Path
) -> Path | None:
    """Stacked bars: each arm's share of out-of-band events by quadrant over the whole run."""
    shares, names = [], []
    for arm in arms:
        per_seed = np.asarray(
            [
                [run.summary(f"clip/q{k}_share", "run-share") for k in range(1, 5)]
                for run in arm.runs.values()
            ]
        )
        if per_seed.size == 0 or np.isnan(per_seed).all():
            continue
        shares.append(np.nanmean(per_seed, axis=0))
        names.append(labels.get(arm.name, arm.name))
    if not shares:
        return None
    fig, ax = plt.subplots(figsize=(1.4 * len(names) + 2.5, 3.4))
    bottom = np.zeros(len(names))
    for k in range(4):
        values = np.asarray([s[k] for s in shares])
        ax.bar(names, values, bottom=bottom, color=QUADRANT_COLORS[k], label=f"Q{k + 1}")
        bottom += values
    ax.set_ylabel("share of out-of-band events")
    ax.set_title(
        f"{title}: events by quadrant (Q1 A>0 r>1, Q2 A>0 r<1, Q3 A<0 r<1, Q4 A<0 r>1)", fontsize=9
    )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", labelsize=8, rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
