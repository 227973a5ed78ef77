"""The diagnostics every objective reports (names are stable API, see ``ALGORITHMS.md``).

All values are detached 0-dim tensors computed over *this call's* response tokens (no
``.item()``: the trainer reduces them once per step, weighting micro-batches by their
token counts if it wants step-level numbers), except ``sft/loss``, a mean over the tokens
of the positive responses only, and the means over sequences of ``SEQUENCE_METRICS``:
:func:`metric_weights` gives their weights.

- ``clip/frac``, ``clip/low_frac``, ``clip/high_frac``: share of response tokens whose
  gradient the clipping zeroes (``gppo``/``cispo``: rescales), split by the bound that
  acted. The dual clip counts as the upper bound (it bounds ``r`` from above); tokens
  with ``A == 0`` are never counted (no clip changes a zero gradient).
- ``clip/q1..q4_frac`` and ``clip/q1..q4_share``: out-of-band events by quadrant
  (ABC-GRPO sec. 4.1, 5.4). An event is a token with ``A != 0`` whose ratio lies outside
  the objective's nominal band; ``Q1: A>0, r>1``, ``Q2: A>0, r<1``, ``Q3: A<0, r<1``,
  ``Q4: A<0, r>1``. ``_frac`` is per response token, ``_share`` per event (the four sum
  to 1 when there are events, all 0 otherwise).
- ``ratio/mean|max|min`` of ``r`` on response tokens; ``kl/old_approx`` is
  ``mean(old_logp - logp)``.
"""

from __future__ import annotations

import torch

from rlvr.objectives.base import ClipInfo, PolicyBatch, masked_extreme, masked_mean

QUADRANTS = ("q1", "q2", "q3", "q4")
SEQUENCE_METRICS = ("pmpo/p", "apmpo/p", "apmpo/eps_ada", "apmpo/fss")
"""Metrics that are means over the call's sequences (one value per sequence), not tokens."""


def clip_metrics(info: ClipInfo, adv: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """``clip/*`` metrics from an objective's :class:`ClipInfo` (see module doc)."""
    ratio = info.ratio.detach()
    dtype = ratio.dtype
    active = mask & (adv != 0)
    low, high = info.low & active, info.high & active
    out = {
        "clip/frac": masked_mean((low | high).to(dtype), mask),
        "clip/low_frac": masked_mean(low.to(dtype), mask),
        "clip/high_frac": masked_mean(high.to(dtype), mask),
    }
    above, below = ratio > info.upper, ratio < info.lower
    pos, neg = active & (adv > 0), active & (adv < 0)
    events = {"q1": pos & above, "q2": pos & below, "q3": neg & below, "q4": neg & above}
    counts = {q: e.sum().to(dtype) for q, e in events.items()}
    total = sum(counts.values()).clamp(min=1)
    tokens = mask.sum().clamp(min=1).to(dtype)
    for q in QUADRANTS:
        out[f"clip/{q}_frac"] = counts[q] / tokens
        out[f"clip/{q}_share"] = counts[q] / total
    return out


def ratio_metrics(batch: PolicyBatch) -> dict[str, torch.Tensor]:
    """``ratio/mean|max|min`` and ``kl/old_approx`` over response tokens."""
    return {
        "ratio/mean": masked_mean(batch.ratio, batch.mask),
        "ratio/max": masked_extreme(batch.ratio, batch.mask, largest=True),
        "ratio/min": masked_extreme(batch.ratio, batch.mask, largest=False),
        "kl/old_approx": masked_mean(-batch.log_ratio, batch.mask),
    }


def metric_weights(
    mask: torch.Tensor, rewards: torch.Tensor | None, sft_threshold: float
) -> dict[str, float]:
    """:func:`metric_weight_tensors` as plain numbers (reading ``sft/loss``'s weight is a
    host-device sync)."""
    return {
        name: float(w) for name, w in metric_weight_tensors(mask, rewards, sft_threshold).items()
    }


def metric_weight_tensors(
    mask: torch.Tensor, rewards: torch.Tensor | None, sft_threshold: float
) -> dict[str, float | torch.Tensor]:
    """Weights of the metrics that are not means over all response tokens, for averaging
    one call's values over micro-batches (the others take the response-token count); a
    weight read from the values stays a tensor on their device.

    ``sft/loss``: the tokens of the responses with ``rewards >= sft_threshold`` (``mask
    [B, T]``, ``rewards [B]``), so the step's value is the token-mean NLL of its positive
    responses, whatever the micro-batches (one without positives adds nothing).
    ``SEQUENCE_METRICS``: the call's ``B`` sequences, so the step's value is their mean
    over the step's sequences.
    """
    weights = dict.fromkeys(SEQUENCE_METRICS, float(mask.shape[0]))
    if rewards is not None:
        positive = (rewards >= sft_threshold).to(mask.device)  # [B]
        weights["sft/loss"] = ((mask != 0) & positive[:, None]).sum()
    return weights
