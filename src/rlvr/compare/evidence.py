"""Whether a claim between arms can be tested at all, and how much the study could detect.

A comparison of two arms says something only where their updates can differ. Two checks,
both on the finished runs:

- **identical runs**: two arms whose runs logged the same training metrics at every step
  and the same held-out results, seed for seed (timings and the contrast itself left out),
  ran the same computation; any difference in a verdict between them would be noise that
  cannot exist. Such a claim is ``untestable``.
- **objective contrast** (``log.contrast``, :mod:`rlvr.objectives.contrast`): the share of
  response tokens on which the two objectives' per-token gradients differed, measured on
  the same batches in one arm's runs. When the arms differ only in their objective and that
  share is 0 over every step of every seed, their updates were identical: ``untestable``.

:func:`evidence` also reports each arm's out-of-band share (events per response token,
the sum of ``clip/q1..q4_frac``), and :func:`rlvr.compare.stats.detectable` the smallest
difference the study's own spread lets it detect with 80% power. For an inconclusive claim,
:func:`rlvr.compare.stats.seeds_to_detect` projects the seeds at which the observed difference,
were it the true one, would be detected with 80% power: from the spread seen, and from that
spread at its 80% upper confidence bound (a few seeds' spread is itself uncertain: plan a
confirmation with the second).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr.compare.claims import INCONCLUSIVE, UNTESTABLE, Verdict
from rlvr.compare.results import ArmData, RunData
from rlvr.compare.stats import POWER, detectable, seeds_to_detect
from rlvr.train.overrides import to_dict

SPREAD_BOUND = 0.8
"""The one-sided upper confidence bound of the per-seed spread behind the cautious seeds count."""

IGNORED_PREFIXES = ("time/", "perf/", "contrast/", "memory/")
"""Metrics that differ between identical computations (clocks) or describe the comparison."""
QUADRANT_FRACS = tuple(f"clip/q{k}_frac" for k in range(1, 5))


@dataclass(frozen=True)
class PairEvidence:
    """What the finished runs say about whether two arms could differ."""

    identical: bool
    """Every common seed's runs logged the same metrics and held-out results."""
    objective_only: bool
    """The two arms' configurations differ only in the objective (name, hyperparameters, aggregation)."""
    token_frac: float | None
    """Mean over steps and seeds of ``contrast/<other>/token_frac`` (None: not logged)."""
    rel_l2: float | None
    """Mean over steps and seeds of ``contrast/<other>/rel_l2``."""
    steps: int
    """Training steps the contrast was read from."""

    @property
    def same_training(self) -> str:
        """How the pair trained the same: "identical runs", "identical updates" (the same
        update at every step, diagnostics aside), or '' when their updates could differ."""
        if self.identical:
            return "identical runs"
        if self.objective_only and self.token_frac == 0.0:
            return "identical updates"
        return ""

    @property
    def untestable(self) -> str:
        """Why the pair cannot differ ('' when it can)."""
        if self.same_training == "identical runs":
            return "bit-identical runs on every seed"
        if self.same_training:
            return (
                f"the objectives' per-token gradients were identical on every token of "
                f"{self.steps} logged steps, all seeds together (contrast 0), and the arms "
                "differ only in the objective"
            )
        return ""


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith(IGNORED_PREFIXES)}


def same_run(a: RunData, b: RunData) -> bool:
    """Whether two runs logged the same metrics at every step and the same held-out results."""
    if len(a.rows) != len(b.rows):
        return False
    if any(_comparable(x) != _comparable(y) for x, y in zip(a.rows, b.rows, strict=True)):
        return False
    return (a.final.get("final_eval") or {}).get("problems") == (
        b.final.get("final_eval") or {}
    ).get("problems")


def objective_only(config_a, config_b) -> bool:
    """Whether two run configurations differ at most in the objective and the run's own
    bookkeeping (seed, output directory, logged contrast)."""

    def rest(config) -> dict[str, Any]:
        data = to_dict(dataclasses.replace(config, seed=0))
        obj = data.pop("objective")
        data["log"].pop("output_dir", None)
        data["log"].pop("contrast", None)
        data["advantage"] = config.loss_config.advantage_mode
        data["regularizers"] = {k: v for k, v in obj.items() if k.endswith(("_coef", "estimator"))}
        return data

    return rest(config_a) == rest(config_b)


def _contrast(host: ArmData, label: str, seeds: list[int]) -> tuple[float, float, int] | None:
    fracs, norms = [], []
    for seed in seeds:
        rows = host.runs[seed].train_rows
        fracs += [
            r[f"contrast/{label}/token_frac"] for r in rows if f"contrast/{label}/token_frac" in r
        ]
        norms += [r[f"contrast/{label}/rel_l2"] for r in rows if f"contrast/{label}/rel_l2" in r]
    if not fracs:
        return None
    return float(np.mean(fracs)), float(np.mean(norms)), len(fracs)


def pair_evidence(
    data: dict[str, ArmData], configs: dict[str, Any], names: dict[str, str], a: str, b: str,
    seeds: list[int],
) -> PairEvidence:  # fmt: skip
    """The evidence on arms ``a`` and ``b`` over ``seeds`` (``names``: each arm's objective as
    a ``log.contrast`` entry; the contrast is read from whichever arm's runs logged it)."""
    identical = all(same_run(data[a].runs[s], data[b].runs[s]) for s in seeds)
    found = _contrast(data[a], names[b], seeds) or _contrast(data[b], names[a], seeds)
    frac, norm, steps = found if found else (None, None, 0)
    if names[a] == names[b]:
        frac, norm = 0.0, 0.0  # the same objective: no contrast is logged, none can exist
    return PairEvidence(identical, objective_only(configs[a], configs[b]), frac, norm, steps)


def out_of_band(arm: ArmData, seeds: list[int]) -> float:
    """Mean over the steps and seeds of the share of response tokens out of band
    (``clip/q1..q4_frac`` summed; NaN when never logged)."""
    values = [
        sum(r[k] for k in QUADRANT_FRACS)
        for s in seeds
        for r in arm.runs[s].train_rows
        if all(r.get(k) is not None for k in QUADRANT_FRACS)
    ]
    return float(np.mean(values)) if values else math.nan


def _seeds_to_decide(verdict: Verdict) -> list[str]:
    """The seeds at which the claim's undecided intervals would all exclude 0 with 80% power,
    were the true differences the ones observed (none when no interval is undecided). With
    ``k`` undecided intervals each is projected at power ``1 - 0.2 / k`` (Bonferroni's bound:
    all ``k`` at once at least 80% of the time, whatever their dependence); each at 80% would
    find all of two independent ones only 64% of the time."""
    undecided = [ci for ci in verdict.intervals.values() if not ci.excludes_zero()]
    if not undecided:
        return []
    power = 1 - (1 - POWER) / len(undecided)

    def most(bound: float | None) -> str | int:
        needed = [
            seeds_to_detect(ci, abs(ci.mean), power=power, spread_bound=bound) for ci in undecided
        ]
        return "over 1000" if None in needed else max(needed)

    single = most(None)
    text = f"seeds to detect the observed difference: {single}"
    if isinstance(single, int):  # "over 1000" needs no cautious count beside it
        text += f" ({most(SPREAD_BOUND)} if the spread is at its {SPREAD_BOUND:.0%} upper bound)"
    return [text]


def _detectable(verdict: Verdict, identical: bool) -> list[str]:
    """The smallest difference the claim's intervals detect at 80% power; none for identical
    runs, and "not estimable" when some interval's differences have no spread (every seed and
    problem differs by the same amount, e.g. two arms that both score 0 everywhere): a
    standard error of 0 would read as a detectable difference of 0, exquisite power."""
    intervals = list(verdict.intervals.values())
    mde = [detectable(ci) for ci in intervals]
    if identical or not mde or not all(math.isfinite(m) for m in mde):
        return []
    if any(ci.se == 0 for ci in intervals):
        return ["detectable at 80% power: not estimable (the differences have no spread)"]
    return [f"detectable at 80% power: {max(mde):.3g}"]


def assess(
    verdict: Verdict,
    data: dict[str, ArmData],
    configs: dict[str, Any],
    names: dict[str, str],
) -> Verdict:
    """``verdict`` marked ``untestable`` when every pair it compares could not differ, with the
    evidence behind it: each pair's contrast, each arm's out-of-band share, and the smallest
    difference its intervals could detect at 80% power."""
    claim, seeds = verdict.claim, verdict.seeds
    if not seeds:
        return verdict
    parts, reasons, identical = [], [], []
    for a, b in claim.pairs:
        ev = pair_evidence(data, configs, names, a, b, seeds)
        reasons.append(ev.untestable)
        identical.append(ev.identical)
        contrast = (
            "contrast not logged"
            if ev.token_frac is None
            else f"contrast {ev.token_frac:.2%} of tokens, rel. L2 {ev.rel_l2:.3g}"
        )
        parts.append(f"{a} vs {b}: {'identical runs; ' if ev.identical else ''}{contrast}")
    arms = dict.fromkeys(claim.arms_needed)
    parts += [f"out of band: {', '.join(f'{n} {out_of_band(data[n], seeds):.3%}' for n in arms)}"]
    parts += _detectable(verdict, bool(identical) and all(identical))
    if reasons and all(reasons):
        why = "; ".join(sorted(set(reasons)))
        return dataclasses.replace(
            verdict,
            status=UNTESTABLE,
            evidence="; ".join(parts),
            numbers=f"{why}. {verdict.numbers}",
        )
    if verdict.status == INCONCLUSIVE:
        parts += _seeds_to_decide(verdict)
    return dataclasses.replace(verdict, evidence="; ".join(parts))
