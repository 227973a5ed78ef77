"""``pmpo`` and ``apmpo``: (Adaptive) Power-Mean Policy Optimization (papers/apmpo.txt
eq. 4-10, appendices H, J).

Per sequence: ``phi_t = |min(r*A, rho*A)|`` with ``rho = clip(r, 1-eps_low, 1+eps_up)``
(eq. 7-8), ``J_i = sign(A_i) * (mean_t phi_t^p)^(1/p)`` (eq. 9), ``loss = -mean_i J_i``
(eq. 10, KL via the regularisers). The exponent follows the reward mean ``mu``:
``p = exp(-gamma*mu)`` (eq. 4) or, with ``p_schedule="linear"``, ``clamp(1 - gamma*mu,
p_min, 1)`` (eq. 11).

- ``pmpo``: fixed band, ``eps_up = eps_high``.
- ``apmpo``: Feedback-Adaptive Clipping, ``FSS = mu/(sigma + delta)`` (eq. 5) and
  ``eps_up = eps_ada = eps_min + (eps_max - eps_min)*tanh(FSS)`` (eq. 6).

Ablation switches of ``apmpo`` (sec. 5.3, fig. 4b, tab. 7; app. K.4, tab. 3):
``fss_form = "mean"`` uses the numerator only (``FSS = mu``), ``"inv_std"`` the denominator
only (``FSS = 1/(sigma + delta)``); ``adaptive_lower = true`` is the symmetric variant of
eq. 81, ``rho = clip(r, 1 - eps_ada, 1 + eps_ada)``. FAC alone is ``apmpo`` with
``gamma = 0`` (``p = 1``); PMPO alone is ``pmpo``.

``mu`` and ``sigma`` (population std) come from precomputed
:class:`rlvr.advantages.GroupStats` rows, over the ``batch`` (default; main text, K.1) or
each ``group`` (Alg. 1 l.7-8), on rewards mapped to ``[0, 1]`` by ``reward_range``.
The per-sequence loss is repeated over each row's tokens (``seq-mean-token-mean`` gives
``mean_i loss_i``). Invariants (tested): at ``p = 1`` ``apmpo`` is ``grpo`` with
``eps_high = eps_ada``; as ``p -> 0`` it tends to the geometric mean of ``phi``.

Departures (from the paper, as ``ALGORITHMS.md`` resolves them):

1. eq. 6 with ``tanh``, not Alg. 1 l.18 (which drops it). ``FSS -> 0`` gives ``eps_min``,
   not the midpoint appendix F claims.
2. Rewards are mapped to ``[0, 1]`` by ``reward_range`` before ``mu``/``sigma`` (the
   paper assumes 0/1 rewards); a reward outside the range is an error, so ``p <= 1``.
3. Numerics: the power mean is computed in log space, ``exp(logmeanexp(p*log phi)/p)``;
   ``p < 1e-4`` uses the geometric-mean limit; ``A_i = 0`` sequences give ``J_i = 0``.
4. Per-token advantages are allowed if they keep one sign per sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.advantages import STATS_SCOPES, GroupStats, StatsOptions, reward_range_pair
from rlvr.objectives.base import (
    ClipInfo,
    ObjectiveOutput,
    PolicyBatch,
    as_bound,
    sequence_signs,
    signed_power_mean_loss,
)
from rlvr.objectives.ppo_clip import check_eps, check_number
from rlvr.objectives.registry import register_objective

P_SCHEDULES = ("exp", "linear")
FSS_FORMS = ("ratio", "mean", "inv_std")


@dataclass(frozen=True)
class PmpoConfig:
    """Power-mean objective with a fixed clip band."""

    gamma: float = 0.8
    """Sensitivity of the exponent to the reward mean (eq. 4)."""
    eps_low: float = 0.2
    """Lower clip width (band edge ``1 - eps_low``)."""
    eps_high: float = 0.2
    """Upper clip width (band edge ``1 + eps_high``)."""
    p_schedule: str = "exp"
    """``exp``: ``p = exp(-gamma*mu)`` (eq. 4); ``linear``: ``1 - gamma*mu`` (eq. 11)."""
    p_min: float = 0.05
    """Floor of the linear schedule."""
    reward_range: tuple[float, float] = (0.0, 1.0)
    """``(lo, hi)`` of the verifier's rewards, mapped to ``[0, 1]`` for ``mu``/``sigma``."""
    stats_scope: str = "batch"
    """``batch`` (paper text) or ``group`` (Alg. 1) for ``mu``/``sigma``."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high, gamma=self.gamma)
        if not math.isfinite(self.gamma):
            raise ValueError(f"gamma must be finite, got {self.gamma}")
        if self.p_schedule not in P_SCHEDULES:
            raise ValueError(
                f"unknown p_schedule {self.p_schedule!r}; valid: {', '.join(P_SCHEDULES)}"
            )
        check_number("p_min", self.p_min)
        if not 0 < self.p_min <= 1:
            raise ValueError(f"p_min must be in (0, 1], got {self.p_min}")
        if self.stats_scope not in STATS_SCOPES:
            raise ValueError(
                f"unknown stats_scope {self.stats_scope!r}; valid: {', '.join(STATS_SCOPES)}"
            )
        # validates reward_range (two numbers, lo < hi) and normalises it to a tuple of floats
        object.__setattr__(self, "reward_range", reward_range_pair(self.reward_range))

    def stats_options(self) -> StatsOptions:
        """The group statistics this objective reads."""
        return StatsOptions(reward_range=tuple(self.reward_range), scope=self.stats_scope)


@dataclass(frozen=True)
class ApmpoConfig(PmpoConfig):
    """APMPO: the power mean plus Feedback-Adaptive Clipping of the upper bound."""

    eps_min: float = 0.2
    """Upper clip width when ``FSS = 0`` (eq. 6)."""
    eps_max: float = 0.4
    """Upper clip width as ``FSS -> inf`` (eq. 6)."""
    delta: float = 1e-6
    """Stabiliser of ``FSS = mu/(sigma + delta)`` (eq. 5)."""
    fss_form: str = "ratio"
    """``ratio``: ``mu/(sigma + delta)`` (eq. 5); ablations (tab. 7) ``mean``: ``mu``; ``inv_std``: ``1/(sigma + delta)``."""
    adaptive_lower: bool = False
    """Also adapt the lower bound, ``clip(r, 1 - eps_ada, 1 + eps_ada)`` (eq. 81, tab. 3 ablation)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._refuse_unread_widths()
        check_eps(eps_min=self.eps_min, eps_max=self.eps_max)
        if not self.eps_min <= self.eps_max < math.inf:
            raise ValueError(f"need eps_min <= eps_max < inf, got {self.eps_min}, {self.eps_max}")
        check_number("delta", self.delta)
        if not 0 < self.delta < math.inf:
            raise ValueError(f"delta must be finite and > 0, got {self.delta}")
        if self.fss_form not in FSS_FORMS:
            raise ValueError(f"unknown fss_form {self.fss_form!r}; valid: {', '.join(FSS_FORMS)}")
        if not isinstance(self.adaptive_lower, bool):
            raise ValueError(f"adaptive_lower must be true or false, got {self.adaptive_lower!r}")
        if self.adaptive_lower and not self.eps_max < 1:
            raise ValueError(
                f"adaptive_lower needs eps_max < 1 (the lower edge 1 - eps_ada must stay > 0), "
                f"got eps_max={self.eps_max}"
            )

    def unread_widths(self) -> tuple[str, ...]:
        """The inherited widths the loss never reads: ``eps_high`` (the upper width is
        ``eps_ada``, eq. 6), and ``eps_low`` too with ``adaptive_lower`` (eq. 81)."""
        return ("eps_low", "eps_high") if self.adaptive_lower else ("eps_high",)

    def _refuse_unread_widths(self) -> None:
        """A width the loss never reads is an error, not a silent no-op."""
        for name in self.unread_widths():
            value = getattr(self, name)
            if value != getattr(PmpoConfig, name):
                raise ValueError(_UNREAD_WIDTH[name].format(value=value))


_UNREAD_WIDTH = {
    "eps_high": "apmpo does not read eps_high (got {value}): its upper width is eps_ada, between "
    "eps_min and eps_max (eq. 6); eps_high is pmpo's fixed width",
    "eps_low": "apmpo with adaptive_lower does not read eps_low (got {value}): both widths are "
    "eps_ada (eq. 81)",
}


def exponent(mu: torch.Tensor, cfg: PmpoConfig) -> torch.Tensor:
    """[B] power-mean exponent ``p`` from the reward mean ``mu`` in ``[0, 1]``."""
    if cfg.p_schedule == "linear":
        return (1.0 - cfg.gamma * mu).clamp(cfg.p_min, 1.0)
    return torch.exp(-cfg.gamma * mu)


def feedback_stability(mu: torch.Tensor, sigma: torch.Tensor, cfg: ApmpoConfig) -> torch.Tensor:
    """[B] FSS in the configured form: ``mu/(sigma+delta)`` (eq. 5), ``mu`` or ``1/(sigma+delta)`` (tab. 7)."""
    if cfg.fss_form == "mean":
        return mu
    if cfg.fss_form == "inv_std":
        return 1.0 / (sigma + cfg.delta)
    return mu / (sigma + cfg.delta)


def adaptive_eps(
    mu: torch.Tensor, sigma: torch.Tensor, cfg: ApmpoConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(eps_ada, fss)``, each [B] (eq. 5-6)."""
    fss = feedback_stability(mu, sigma, cfg)
    return cfg.eps_min + (cfg.eps_max - cfg.eps_min) * torch.tanh(fss), fss


def _checked_stats(stats: GroupStats, cfg: PmpoConfig, name: str) -> GroupStats:
    options = stats.options
    if options.reward_range != cfg.reward_range or options.scope != cfg.stats_scope:
        raise ValueError(
            f"group_stats were computed with reward_range={options.reward_range}, "
            f"scope={options.scope!r}; {name} has reward_range={cfg.reward_range}, "
            f"stats_scope={cfg.stats_scope!r} (use group_stats_for({name!r}, ...))"
        )
    return stats


def power_mean_loss(
    batch: PolicyBatch,
    eps_low: float | torch.Tensor,
    eps_up: torch.Tensor,
    p: torch.Tensor,
) -> ObjectiveOutput:
    """Shared body of pmpo/apmpo: lower widths ``eps_low`` (a number or [B], each < 1 or
    ``inf``), upper widths ``eps_up [B]``, exponents ``p [B]``."""
    adv, lr, ratio = batch.advantages, batch.log_ratio, batch.ratio
    sign = sequence_signs(adv, batch.mask)
    if isinstance(eps_low, torch.Tensor):
        log_lower = torch.log1p(-eps_low)[:, None]  # [B, 1]
        lower = (1.0 - eps_low)[:, None]
    else:
        log_lower = math.log(1.0 - eps_low) if eps_low < 1 else -math.inf
        lower = 1.0 - eps_low
    log_upper = torch.log1p(eps_up)[:, None]  # [B, 1]
    upper = (1.0 + eps_up)[:, None]
    # which bound acts is decided on r itself, as in ppo_clip (a log ratio within an ulp of
    # log(bound) can exponentiate onto the bound); the kept magnitude is in log space
    low = (adv < 0) & (ratio < as_bound(lower, ratio))
    high = (adv > 0) & (ratio > as_bound(upper, ratio))
    kept = torch.where(high, as_bound(log_upper, lr), torch.where(low, as_bound(log_lower, lr), lr))
    log_phi = torch.log(adv.abs()) + kept  # [B, T] log|min(r*A, rho*A)|
    per_seq = signed_power_mean_loss(log_phi, sign, batch.mask, p)  # [B]
    info = ClipInfo(batch.ratio, lower, upper, low, high)
    return ObjectiveOutput(per_seq[:, None].expand_as(lr), info, {})


def _row_mean(values: torch.Tensor) -> torch.Tensor:
    return values.detach().mean()


@register_objective(
    "pmpo",
    config=PmpoConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="PMPO (APMPO eq. 4, 7-10)",
    group_stats=True,
    sequence_level=True,
)
def pmpo_loss(batch: PolicyBatch, cfg: PmpoConfig) -> ObjectiveOutput:
    """Power-mean loss with the fixed band ``[1-eps_low, 1+eps_high]``."""
    stats = _checked_stats(batch.stats, cfg, "pmpo")
    mu = stats.reward_mean.to(batch.ratio.dtype)
    p = exponent(mu, cfg)
    eps_up = torch.full_like(mu, cfg.eps_high)
    out = power_mean_loss(batch, cfg.eps_low, eps_up, p)
    return out._replace(metrics={"pmpo/p": _row_mean(p)})


@register_objective(
    "apmpo",
    config=ApmpoConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="APMPO eq. 4-10, app. H, J",
    group_stats=True,
    sequence_level=True,
)
def apmpo_loss(batch: PolicyBatch, cfg: ApmpoConfig) -> ObjectiveOutput:
    """Power-mean loss with the feedback-adaptive upper bound ``1 + eps_ada``."""
    stats = _checked_stats(batch.stats, cfg, "apmpo")
    mu = stats.reward_mean.to(batch.ratio.dtype)
    sigma = stats.reward_std.to(batch.ratio.dtype)
    p = exponent(mu, cfg)
    eps_ada, fss = adaptive_eps(mu, sigma, cfg)
    eps_low = eps_ada if cfg.adaptive_lower else cfg.eps_low
    out = power_mean_loss(batch, eps_low, eps_ada, p)
    metrics = {
        "apmpo/p": _row_mean(p),
        "apmpo/eps_ada": _row_mean(eps_ada),
        "apmpo/fss": _row_mean(fss),
    }
    return out._replace(metrics=metrics)
