"""rlvr's advantage modes as verl advantage estimators: ``rlvr_group_std``, ``rlvr_group_mean``,
``rlvr_batch_std`` (``algorithm.adv_estimator=rlvr_group_std``).

verl's own ``grpo`` estimator divides by the unbiased (``G - 1``) std; ``ALGORITHMS.md``'s
``group_std`` (GRPO, ETR, GPPO, APMPO) uses the population std (``G``). ``rlvr_group_mean``
equals verl's ``grpo`` with ``norm_adv_by_std_in_grpo=False`` (ABC-GRPO eq. 3, Dr.GRPO).
Groups are verl's ``uid`` labels; rows without response tokens (verl's padding) get 0 and
stay out of the batch-wide std (:mod:`rlvr.engines.verl.stats`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from rlvr.advantages import ADVANTAGE_MODES
from rlvr.engines.verl.config import PREFIX
from rlvr.engines.verl.stats import labelled_advantages


def _estimator(mode: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: Any = None,
        config: Any = None,
        **_: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if index is None:
            raise ValueError(f"{PREFIX}{mode} groups responses by verl's uid, which is missing")
        scores = token_level_rewards.sum(dim=-1)  # [B]
        valid = response_mask.sum(dim=-1) > 0
        adv = labelled_advantages(scores, index, mode, valid).to(token_level_rewards.dtype)
        adv = adv[:, None] * response_mask  # [B, T]
        return adv, adv

    estimator.__name__ = estimator.__qualname__ = f"{PREFIX}{mode}"
    estimator.__doc__ = f"rlvr's ``{mode}`` advantages over verl's uid groups."
    return estimator


ESTIMATORS = {
    f"{PREFIX}{mode}": register_adv_est(f"{PREFIX}{mode}")(_estimator(mode))
    for mode in ADVANTAGE_MODES
}
"""The registered verl advantage estimators, ``rlvr_<mode>`` -> function."""
