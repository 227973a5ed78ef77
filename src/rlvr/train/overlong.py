"""DAPO's soft overlong punishment (Yu et al. 2025, "DAPO", sec. 3.4, eq. 13).

With ``L_max = rollout.max_new_tokens`` and ``L_cache = reward.overlong_buffer``, a
completion of ``|y|`` tokens gets

    R_length(y) = 0                                  if |y| <= L_max - L_cache
                  ((L_max - L_cache) - |y|) / L_cache if L_max - L_cache < |y| <= L_max
                  -1                                 if |y| > L_max

times ``reward.overlong_penalty`` (verl's ``overlong_buffer.penalty_factor``; the paper's 1),
added to the verifier's score. ``|y|`` counts the tokens the policy generated, EOS included,
as ``response/length_mean`` does (verl counts the same way). Departures from the paper:

1. The penalty is scaled by ``reward.overlong_penalty`` (DAPO's eq. 13 has none: factor 1).
2. No completion here is longer than ``L_max`` (sampling stops there), so the last case is
   reached only by a completion of exactly ``L_max`` tokens: the middle case gives it -1 too.

The trainer learns from the shaped reward (advantages, the zero-advantage filter); what
reads a reward as correctness keeps the verifier's score (docs/training.md, "Soft overlong
punishment").
"""

from __future__ import annotations

import torch


def overlong_penalty(
    lengths: torch.Tensor, max_len: int, buffer: int, factor: float = 1.0
) -> torch.Tensor:
    """``[B]`` float32 penalties (<= 0) of completions of ``lengths [B]`` tokens under a cap
    of ``max_len`` with the last ``buffer`` tokens punished (DAPO eq. 13, scaled by
    ``factor``); all 0 when ``buffer`` is 0.

    >>> overlong_penalty(torch.tensor([10, 12, 13, 14, 16]), max_len=16, buffer=4)
    tensor([ 0.0000,  0.0000, -0.2500, -0.5000, -1.0000])
    """
    lengths = lengths.float()
    if buffer == 0:
        return torch.zeros_like(lengths)
    over = (lengths - (max_len - buffer)).clamp(min=0.0, max=float(buffer))  # [B]
    return 0.0 - factor * (over / buffer)  # at most factor (no overflow); 0.0 -: no -0.0
