"""The papers' qualitative claims and the rules that mark each reproduced, not reproduced or inconclusive.

A claim file (bundled in ``rlvr/compare/claims/<name>.yaml`` or any path) lists claims::

    paper: ABC-GRPO (papers/abc-grpo.txt)
    claims:
      - id: abc-entropy
        source: sec. 5.3, fig. 4(d)
        text: ABC-GRPO keeps entropy higher than GRPO
        rule: direction
        metric: policy/entropy
        summary: mean               # rlvr.compare.results: mean | late | final | run-share
        arm: abc/abc_grpo
        baseline: abc/grpo
        direction: higher           # or lower

Three rules, each on per-seed values paired by seed (:mod:`rlvr.compare.stats`; held-out
metrics with ``summary: final`` are also paired by problem, matched by id; arms that evaluated
different problems do not pair and the claim is inconclusive):

- ``direction`` (``arm`` vs ``baseline`` on ``metric``): the paired 95% t interval of
  ``arm - baseline`` (:func:`rlvr.compare.stats.paired_interval`). **Reproduced** when it excludes 0 on the claimed side, **not
  reproduced** when it excludes 0 on the other side, **inconclusive** otherwise.
- ``order`` (``arms: [a, b, c]`` on one ``metric``, or ``metrics: [m1, m2, ...]`` of one
  ``arm``; claimed ``a < b < c`` for ``direction: increasing``, ``>`` for ``decreasing``):
  the interval of each consecutive difference. **Reproduced** when every one excludes 0 on
  the claimed side, **not reproduced** when any excludes 0 on the other side,
  **inconclusive** otherwise.
- ``largest`` (``expect`` is the largest of ``metrics`` of one ``arm``): the interval of
  ``expect - other`` for every other metric. **Reproduced** when all are above 0, **not
  reproduced** when any is below 0, **inconclusive** otherwise.
- ``interaction`` (a 2 x 2 ablation, ``arms: [neither, a_only, b_only, both]`` on one
  ``metric``; ``direction: lower`` claims that the two changes together do less than their
  separate effects add up to): the interval of the per-seed interaction contrast
  ``both - a_only - b_only + neither``, from one value per run (per-run summaries, not paired
  by problem). Decided as ``direction``; the numbers also give each change's main effect
  (its mean effect over the other's two levels), which is not judged.

A claim whose arms did not all finish the same seeds (at least 2) is **inconclusive** and
says why. A claim between arms that could not differ (bit-identical runs, or objectives whose
per-token gradients were identical on every token: :mod:`rlvr.compare.evidence`) is
**untestable**. The rules are fixed before the runs and the verdict is whatever they give.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from rlvr.bundled import bundled_names, read_source
from rlvr.compare.results import SHARE, SUMMARIES, ArmData, paired_problems
from rlvr.compare.stats import MIN_SEEDS, Interval, paired_interval
from rlvr.train.overrides import NOT_A_KEY, from_file

RULES = ("direction", "order", "largest", "interaction")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
UNTESTABLE = "untestable"
"""The arms a claim compares could not differ (identical runs, or identical updates)."""
CONFIRMATORY, DESCRIPTIVE = "confirmatory", "descriptive"
"""A verdict's role where a study names its confirmatory claims (``confirms``)."""


@dataclass(frozen=True)
class Claim:
    """One qualitative claim of a paper and how it is tested (an item of a claim file's
    ``claims``; the checks of its rule run when it is built)."""

    id: str
    paper: str = field(default="", metadata=NOT_A_KEY)
    """The paper, from the claim file's ``paper``."""
    source: str = ""
    """Where the paper makes it (section, figure or table)."""
    text: str = ""
    rule: str = ""
    summary: str = "mean"
    metric: str | None = None
    metrics: tuple[str, ...] = ()
    arm: str | None = None
    arms: tuple[str, ...] = ()
    baseline: str | None = None
    direction: str = "higher"
    expect: str | None = None

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arms_needed(self) -> list[str]:
        names = [self.arm, self.baseline, *self.arms]
        return [n for n in names if n]

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The ``(arm, other arm)`` pairs the rule compares (none for one arm's metrics)."""
        if self.rule == "direction":
            return [(self.arm, self.baseline)]
        if self.rule == "order" and self.arms:
            return list(zip(self.arms[1:], self.arms[:-1], strict=True))
        return []

    @property
    def claimed_side(self) -> int:
        """The sign every interval of the rule has when the claim holds: +1 for ``higher``,
        ``increasing`` and ``largest`` (``arm - baseline``, later - earlier, expected - other),
        -1 for ``lower`` and ``decreasing``."""
        return -1 if self.direction in ("lower", "decreasing") and self.rule != "largest" else 1

    @property
    def reads(self) -> list[tuple[str, str]]:
        """Every ``(arm, metric)`` the claim's rule reads."""
        if self.rule == "direction":
            return [(self.arm, self.metric), (self.baseline, self.metric)]
        return _steps(self)


EVAL_AT_K = re.compile(r"eval/(?:avg|pass)@(\d+)")


def unmeasured(claim: Claim, configs: dict[str, Any]) -> list[str]:
    """Why the runs configured by ``configs`` (arm name -> ``TrainConfig``) cannot log what
    ``claim`` reads: a held-out metric with no held-out data, an ``eval/avg@k`` /
    ``eval/pass@k`` with ``k`` outside the arm's ``eval.ks``, or no evaluation after step 0
    (it would score the untrained model). Empty when they can."""
    problems = []
    for arm, metric in claim.reads:
        if arm not in configs or not metric.startswith("eval/"):
            continue
        cfg, match = configs[arm], EVAL_AT_K.fullmatch(metric)
        ev = cfg.eval
        if cfg.data.eval is None:
            problems.append(f"{arm} has no held-out data (data.eval) for {metric}")
        elif match is not None and int(match.group(1)) not in ev.ks:
            problems.append(f"{arm} evaluates eval.ks={list(ev.ks)} (eval.n={ev.n}), not {metric}")
        elif not (ev.at_end or 0 < ev.every <= cfg.steps):
            problems.append(
                f"{arm} evaluates only before training (eval.every={ev.every}, steps={cfg.steps}, "
                f"eval.at_end=false): {metric} would score the untrained model"
            )
    return problems


@dataclass
class Verdict:
    """The outcome of one claim: status, the numbers behind it and the rule that decided."""

    claim: Claim
    status: str
    numbers: str
    """Human-readable numbers: the per-arm means and the intervals that decided."""
    rule: str
    """The rule in words, as applied."""
    intervals: dict[str, Interval] = field(default_factory=dict)
    """Each compared pair's paired interval, by ``"a - b"``."""
    seeds: list[int] = field(default_factory=list)
    regime: str = ""
    """The study regime whose runs were judged."""
    evidence: str = ""
    """Whether the compared arms could differ: contrast, out-of-band share, detectable effect."""
    p: float | None = None
    """The verdict's p-value (:mod:`rlvr.compare.multiplicity`); None when nothing was tested."""
    p_holm: float | None = None
    """``p`` corrected across the study's tested claims by Holm's method."""
    q_bh: float | None = None
    """``p`` corrected across the study's tested claims by Benjamini-Hochberg's method."""
    role: str = ""
    """``confirmatory`` or ``descriptive`` in a study that names its confirmatory claims
    (``confirms``); ``""`` otherwise, every tested claim in the corrected family."""


def bundled_claim_files() -> list[str]:
    return bundled_names("rlvr.compare", "claims")


@dataclass(frozen=True)
class ClaimFile:
    """The keys of a claim file."""

    LABEL: ClassVar[str] = "a claim file"

    paper: str = ""
    """The paper every claim of the file is from."""
    claims: tuple[Claim, ...] = ()
    """The claims, each checked as it is read."""


def load_claims(name_or_path: str) -> list[Claim]:
    """Claims from a bundled claim file name or a YAML path (each checked)."""
    source = read_source(
        name_or_path,
        package="rlvr.compare",
        folder="claims",
        kind="bundled claims",
        choices=bundled_claim_files,
    )
    claims = from_file(ClaimFile, source.data, source.where)
    return [replace(c, paper=claims.paper) for c in claims.claims]


def _check(c: Claim) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ValueError(f"claim {c.id!r}: {message}")

    need(bool(c.id and c.text and c.rule), "needs id, text and rule")
    need(c.rule in RULES, f"unknown rule {c.rule!r}; valid: {', '.join(RULES)}")
    need(c.summary in SUMMARIES, f"unknown summary {c.summary!r}; valid: {', '.join(SUMMARIES)}")
    _check_distinct(c, need)
    if c.rule == "direction":
        need(bool(c.metric and c.arm and c.baseline), "direction needs metric, arm and baseline")
        need(c.direction in ("higher", "lower"), "direction must be higher or lower")
    elif c.rule == "order":
        need(
            c.direction in ("increasing", "decreasing"),
            "order needs direction increasing or decreasing",
        )
        by_arms = bool(c.arms and c.metric)
        by_metrics = bool(c.metrics and c.arm)
        need(by_arms != by_metrics, "order needs either arms + metric or metrics + arm")
        need(len(c.arms or c.metrics) >= 2, "order needs at least two items")
    elif c.rule == "interaction":
        need(
            bool(c.metric) and len(c.arms) == 4,
            "interaction needs metric and arms: [neither, a_only, b_only, both]",
        )
        need(c.direction in ("higher", "lower"), "direction must be higher or lower")
    else:
        need(
            bool(c.arm and c.metrics and c.expect in c.metrics),
            "largest needs arm, metrics and expect in metrics",
        )


def _check_distinct(c: Claim, need: Callable[[bool, str], None]) -> None:
    """Refuse what would compare a thing with itself (every difference 0, judged as if it
    were a finding): an arm as its own baseline, an arm or metric named twice; and a
    ``run-share`` of a metric that is no quadrant share (undefined for every run)."""
    need(c.arm is None or c.arm != c.baseline, f"arm and baseline are both {c.arm!r}")
    for key, items in (("arms", c.arms), ("metrics", c.metrics)):
        twice = sorted({x for x in items if items.count(x) > 1})
        need(not twice, f"{key} names {', '.join(twice)} more than once")
    if c.summary == "run-share":
        other = [m for m in (c.metric, *c.metrics) if m and not SHARE.fullmatch(m)]
        need(
            not other,
            f"summary run-share applies to clip/q1_share .. clip/q4_share, not {', '.join(other)}",
        )


# ------------------------------------------------------------------ judging


def paired_arrays(
    data: dict[str, ArmData], a: str, b: str, ma: str, mb: str, summary: str, seeds: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``[S, P]`` values of ``a:ma`` and ``b:mb``: per problem, matched by problem id, for a final
    held-out score of both (when every run kept its per-problem results and all evaluated the
    same problems), else ``[S, 1]`` per-run summaries. ``ValueError`` when ``a`` and ``b``
    evaluated different held-out problems at a seed."""
    if summary == "final" and ma == mb:
        pairs = paired_problems(data[a], data[b], ma, seeds)
        if pairs is not None and not (np.isnan(pairs[0]).any() or np.isnan(pairs[1]).any()):
            return pairs
    left = data[a].values(ma, summary, seeds)[:, None]
    right = data[b].values(mb, summary, seeds)[:, None]
    if np.isnan(left).any() or np.isnan(right).any():
        arm, metric = (a, ma) if np.isnan(left).any() else (b, mb)
        if unlogged := never_logged(data[arm], metric):
            raise ValueError(unlogged)
        raise ValueError(
            f"{metric} ({summary}) is undefined in some run (never logged or, for late, not in "
            "the steps past three quarters of the run; not finite at a step it summarises; or no out-of-band events for "
            "a quadrant share)"
        )
    return left, right


def never_logged(arm: ArmData, metric: str) -> str:
    """Why ``arm`` has no value of ``metric`` when none of its runs logged it at any step (a
    misspelt name), with the nearest name they did log; ``""`` when some run logged it."""
    logged = {key for run in arm.runs.values() for row in run.rows for key in row}
    if metric in logged:
        return ""
    near = difflib.get_close_matches(metric, sorted(logged - {"step"}), n=1)
    hint = f"; did you mean {near[0]}?" if near else " (docs/metrics.md lists the names)"
    return f"no run of {arm.name} logged {metric}{hint}"


def _pair(
    claim: Claim, data: dict[str, ArmData], a: str, b: str, ma: str, mb: str, seeds
) -> Interval:
    """Paired interval of ``a:ma - b:mb`` over ``seeds`` (by problem too for final held-out scores)."""
    return paired_interval(*paired_arrays(data, a, b, ma, mb, claim.summary, seeds))


def _seeds(claim: Claim, data: dict[str, ArmData]) -> tuple[list[int], str]:
    missing = [n for n in claim.arms_needed if n not in data or not data[n].runs]
    if missing:
        return [], f"no finished runs of {', '.join(missing)}"
    seeds = set.intersection(*(set(data[n].runs) for n in claim.arms_needed))
    if len(seeds) < MIN_SEEDS:
        return [], f"fewer than {MIN_SEEDS} seeds finished by every arm it needs"
    return sorted(seeds), ""


def judge(claim: Claim, data: dict[str, ArmData]) -> Verdict:
    """Apply the claim's rule to the finished runs in ``data`` (arm name -> runs)."""
    seeds, why = _seeds(claim, data)
    rule = RULE_TEXT[claim.rule]
    if not seeds:
        return Verdict(claim, INCONCLUSIVE, why, rule)
    try:
        return JUDGES[claim.rule](claim, data, seeds)
    except ValueError as err:
        return Verdict(claim, INCONCLUSIVE, str(err), rule, seeds=seeds)


def _mean(claim: Claim, data: dict[str, ArmData], arm: str, metric: str, seeds) -> float:
    return float(np.mean(data[arm].values(metric, claim.summary, seeds)))


def _status(claim: Claim, intervals: Iterable[Interval]) -> str:
    """Reproduced when every interval excludes 0 on the claim's side
    (:attr:`Claim.claimed_side`), not reproduced when any excludes it on the other side, else
    inconclusive."""
    want, sides = claim.claimed_side, [ci.excludes_zero() for ci in intervals]
    if all(side == want for side in sides):
        return REPRODUCED
    return NOT_REPRODUCED if any(side == -want for side in sides) else INCONCLUSIVE


def _direction(claim: Claim, data: dict[str, ArmData], seeds) -> Verdict:
    ci = _pair(claim, data, claim.arm, claim.baseline, claim.metric, claim.metric, seeds)
    status = _status(claim, [ci])
    a = _mean(claim, data, claim.arm, claim.metric, seeds)
    b = _mean(claim, data, claim.baseline, claim.metric, seeds)
    numbers = (
        f"{claim.metric} ({claim.summary}): {claim.arm} {a:.4g}, {claim.baseline} {b:.4g}; "
        f"difference {ci.text(4)} (95% CI, {len(seeds)} seeds)"
    )
    key = f"{claim.arm} - {claim.baseline}"
    return Verdict(claim, status, numbers, RULE_TEXT["direction"], {key: ci}, seeds)


def _steps(claim: Claim) -> list[tuple[str, str]]:
    """The ordered items as ``(arm, metric)`` pairs."""
    if claim.arms:
        return [(a, claim.metric) for a in claim.arms]
    return [(claim.arm, m) for m in claim.metrics]


def _order(claim: Claim, data: dict[str, ArmData], seeds) -> Verdict:
    items = _steps(claim)
    intervals = {}
    for (a0, m0), (a1, m1) in zip(items, items[1:], strict=False):
        ci = _pair(claim, data, a1, a0, m1, m0, seeds)
        intervals[f"{_name(claim, a1, m1)} - {_name(claim, a0, m0)}"] = ci
    status = _status(claim, intervals.values())
    means = ", ".join(
        f"{_name(claim, a, m)} {_mean(claim, data, a, m, seeds):.4g}" for a, m in items
    )
    diffs = "; ".join(f"{k}: {ci.text(4)}" for k, ci in intervals.items())
    numbers = (
        f"{claim.summary}: {means}; consecutive differences {diffs} (95% CI, {len(seeds)} seeds)"
    )
    return Verdict(claim, status, numbers, RULE_TEXT["order"], intervals, seeds)


def _largest(claim: Claim, data: dict[str, ArmData], seeds) -> Verdict:
    intervals = {}
    for other in claim.metrics:
        if other == claim.expect:
            continue
        ci = _pair(claim, data, claim.arm, claim.arm, claim.expect, other, seeds)
        intervals[f"{claim.expect} - {other}"] = ci
    status = _status(claim, intervals.values())
    means = ", ".join(f"{m} {_mean(claim, data, claim.arm, m, seeds):.3f}" for m in claim.metrics)
    diffs = "; ".join(f"{k}: {ci.text(3)}" for k, ci in intervals.items())
    numbers = f"{claim.arm} ({claim.summary}): {means}; {diffs} (95% CI, {len(seeds)} seeds)"
    return Verdict(claim, status, numbers, RULE_TEXT["largest"], intervals, seeds)


def _interaction(claim: Claim, data: dict[str, ArmData], seeds) -> Verdict:
    """The 2 x 2 interaction ``both - a_only - b_only + neither``, one value per seed."""
    neither, a_only, b_only, both = (
        data[arm].values(claim.metric, claim.summary, seeds) for arm in claim.arms
    )
    contrast = both - a_only - b_only + neither
    if np.isnan(contrast).any():
        unlogged = [never_logged(data[arm], claim.metric) for arm in claim.arms]
        raise ValueError(
            next((u for u in unlogged if u), "")
            or f"{claim.metric} ({claim.summary}) is undefined in some run"
        )

    def interval(per_seed: np.ndarray) -> Interval:
        return paired_interval(per_seed[:, None], np.zeros((len(seeds), 1)))

    ci = interval(contrast)
    status = _status(claim, [ci])
    means = ", ".join(f"{a} {_mean(claim, data, a, claim.metric, seeds):.4g}" for a in claim.arms)
    main_a = interval((a_only - neither + both - b_only) / 2)
    main_b = interval((b_only - neither + both - a_only) / 2)
    numbers = (
        f"{claim.metric} ({claim.summary}): {means}; interaction (both - a_only - b_only + "
        f"neither) {ci.text(4)}; main effects (not judged) a {main_a.text(4)}, b "
        f"{main_b.text(4)} (95% CI, {len(seeds)} seeds)"
    )
    return Verdict(claim, status, numbers, RULE_TEXT["interaction"], {"interaction": ci}, seeds)


def _name(claim: Claim, arm: str, metric: str) -> str:
    return arm if claim.arms else metric


JUDGES = {
    "direction": _direction,
    "order": _order,
    "largest": _largest,
    "interaction": _interaction,
}
RULE_TEXT = {
    "direction": "paired 95% t CI of arm - baseline: excludes 0 on the claimed side -> "
    "reproduced; on the other side -> not reproduced; contains 0 -> inconclusive",
    "order": "paired 95% t CI of each consecutive difference: all on the claimed side -> "
    "reproduced; any on the other side -> not reproduced; else inconclusive",
    "largest": "paired 95% t CI of expected - each other: all > 0 -> reproduced; any < 0 -> "
    "not reproduced; else inconclusive",
    "interaction": "95% t CI of the per-seed both - a_only - b_only + neither: excludes 0 on the "
    "claimed side -> reproduced; on the other side -> not reproduced; contains 0 -> inconclusive",
}
