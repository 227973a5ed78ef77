"""Reading finished study runs: metric curves, per-run summaries, per-problem held-out scores.

A run directory holds the trainer's ``metrics.jsonl`` and the worker's ``final.json``
(:mod:`rlvr.compare.worker`). Summaries reduce one run's curve of a metric to a number:

- ``mean``: the mean over all training steps where the metric was logged (for a reward
  curve, the area under it: a faster rise from the same start gives a larger mean);
- ``late``: the mean over the steps past three quarters of the run (step > 0.75 x the last:
  the last quarter of a long run, 2 of 6 steps; undefined when none of them logged it);
- ``final``: the value at the last step that logged it (held-out metrics: the final evaluation);
- ``run-share`` (quadrant shares ``clip/qK_share``): events of quadrant K over all events
  of the run, from the per-token fractions weighted by each step's token count.

A step that did not log the metric (a skipped update logs no entropy) is left out. A value
the trainer wrote as ``null`` (not finite) is not: a summary over it is NaN, so a claim on
it is inconclusive and says why, instead of quietly using the steps before a divergence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvr.compare.worker import FINAL_FILE, read_final
from rlvr.evaluation.metrics import pass_at_k
from rlvr.train.metrics import METRICS_FILE, read_metrics

SUMMARIES = ("mean", "late", "final", "run-share")
SHARE = re.compile(r"clip/q([1-4])_share")


@dataclass
class RunData:
    """One finished run."""

    seed: int
    rows: list[dict[str, Any]]
    """``metrics.jsonl`` rows (step 0: the evaluation before training)."""
    final: dict[str, Any]
    """``final.json``."""

    @property
    def seconds(self) -> float:
        """Wall-clock seconds of the run's steps and evaluations (``time/step`` + ``time/eval``)."""
        return float(
            sum((r.get("time/step") or 0.0) + (r.get("time/eval") or 0.0) for r in self.rows)
        )

    @property
    def code(self) -> str:
        """The rlvr source hash the run was made with (``unknown`` for runs older than the record)."""
        return str(self.final.get("code") or "unknown")

    @property
    def train_rows(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("step", 0) >= 1]

    def curve(self, metric: str, *, nonfinite: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of ``metric`` where logged (held-out metrics include step 0).

        A value written as ``null`` (not finite) is left out, or NaN with ``nonfinite``.
        """
        pairs = [
            (r["step"], math.nan if r[metric] is None else r[metric])
            for r in self.rows
            if metric in r and (metric.startswith("eval/") or r["step"] >= 1)
        ]
        if not nonfinite:
            pairs = [p for p in pairs if not math.isnan(p[1])]
        if not pairs:
            return np.zeros(0), np.zeros(0)
        steps, values = zip(*pairs, strict=True)
        return np.asarray(steps, float), np.asarray(values, float)

    def summary(self, metric: str, how: str) -> float:
        """One number for this run (see the module doc); NaN when the metric was never logged
        or was not finite at a step the summary covers."""
        if how == "run-share":
            return self._run_share(metric)
        steps, values = self.curve(metric, nonfinite=True)
        if values.size == 0:
            return math.nan
        if how == "final":
            return float(values[-1])
        if how == "late":
            last = max(r["step"] for r in self.rows)
            keep = steps > 0.75 * last
            return float(values[keep].mean()) if keep.any() else math.nan
        if how == "mean":
            return float(values.mean())
        raise ValueError(f"unknown summary {how!r}; valid: {', '.join(SUMMARIES)}")

    def _run_share(self, metric: str) -> float:
        match = SHARE.fullmatch(metric)
        if match is None:
            raise ValueError(
                f"summary run-share applies to clip/q1_share .. clip/q4_share, not {metric}"
            )
        events = np.zeros(4)
        for row in self.train_rows:
            tokens = row.get("batch/tokens") or 0.0
            keys = [f"clip/q{k}_frac" for k in range(1, 5)]
            if not all(k in row for k in keys):
                continue  # no update this step
            fracs = [math.nan if row[k] is None else row[k] for k in keys]
            events += np.asarray(fracs, float) * tokens
        total = events.sum()
        return float(events[int(match.group(1)) - 1] / total) if total > 0 else math.nan

    def problem_scores(self, metric: str) -> np.ndarray | None:
        """[P] per-problem values of a held-out metric at the final evaluation (None if absent)."""
        final_eval = self.final.get("final_eval")
        if not final_eval or not metric.startswith("eval/"):
            return None
        name = metric[len("eval/") :]
        problems = final_eval["problems"]
        if name.startswith("avg@"):
            return np.asarray([p["c"] / p["n"] for p in problems], float)
        if name.startswith("pass@"):
            k = int(name.split("@")[1])
            return np.asarray([pass_at_k(p["n"], p["c"], k) for p in problems], float)
        if name.startswith("diversity/"):
            key = name[len("diversity/") :]
            values = [p["diversity"].get(key) for p in problems]
            return np.asarray([math.nan if v is None else v for v in values], float)
        return None

    def problem_ids(self) -> list[str]:
        final_eval = self.final.get("final_eval") or {}
        return [p["id"] for p in final_eval.get("problems", [])]


@dataclass
class ArmData:
    """The finished runs of one arm, by seed."""

    name: str
    runs: dict[int, RunData] = field(default_factory=dict)

    def values(self, metric: str, how: str, seeds: list[int]) -> np.ndarray:
        """[S] per-seed summaries over ``seeds``."""
        return np.asarray([self.runs[s].summary(metric, how) for s in seeds], float)


def problem_keys(run: RunData) -> list[tuple[str, int]]:
    """Each held-out problem of the final evaluation as ``(id, occurrence)`` (a repeated id
    still names one problem)."""
    seen: dict[str, int] = {}
    keys = []
    for ident in run.problem_ids():
        seen[ident] = seen.get(ident, -1) + 1
        keys.append((ident, seen[ident]))
    return keys


def paired_problems(
    a: ArmData, b: ArmData, metric: str, seeds: list[int]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``[S, P]`` per-problem values of held-out ``metric`` of ``a`` and ``b``, columns matched by
    problem id. None when some run kept no per-problem results, or when the seeds evaluated
    different problems (each pair then shares only its seed). Raises ``ValueError`` when ``a``
    and ``b`` evaluated different problems at one seed: their scores do not pair."""
    runs = [r for s in seeds for r in (a.runs[s], b.runs[s])]
    scores = [r.problem_scores(metric) for r in runs]
    if any(v is None for v in scores):
        return None
    keys = [problem_keys(r) for r in runs]
    for seed, ka, kb in zip(seeds, keys[::2], keys[1::2], strict=True):
        if set(ka) != set(kb):
            raise ValueError(
                f"{metric}: {a.name} and {b.name} evaluated different held-out problems "
                f"(seed {seed}: {len(ka)} and {len(kb)} problems, {len(set(ka) & set(kb))} "
                "in common), so their scores do not pair"
            )
    order = keys[0]
    if any(set(k) != set(order) for k in keys):
        return None
    rows = [
        np.asarray([dict(zip(k, v, strict=True))[key] for key in order], float)
        for k, v in zip(keys, scores, strict=True)
    ]
    return np.stack(rows[::2]), np.stack(rows[1::2])


def load_run(run_dir: Path, seed: int) -> RunData | None:
    """The run in ``run_dir`` if it finished (``final.json`` present), else None."""
    final = run_dir / FINAL_FILE
    if not final.is_file():
        return None
    return RunData(seed, read_metrics(run_dir / METRICS_FILE), read_final(run_dir))


def common_seeds(a: ArmData, b: ArmData | None = None) -> list[int]:
    """Seeds finished by ``a`` (and ``b``), sorted."""
    seeds = set(a.runs) if b is None else set(a.runs) & set(b.runs)
    return sorted(seeds)
