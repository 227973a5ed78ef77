"""rlvr's objectives inside verl (``pip install "rlvr[verl]"``; ``docs/engines.md``).

Importing this package registers, in verl 0.9's registries:

- every objective as a policy loss ``rlvr_<name>`` (``rlvr_grpo``, ``rlvr_abc_grpo``,
  ``rlvr_etr``, ``rlvr_gppo``, ``rlvr_apmpo``, ...; :mod:`.losses`), selected with
  ``actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo``;
- rlvr's advantage modes ``rlvr_group_std``, ``rlvr_group_mean``, ``rlvr_batch_std``
  (:mod:`.advantages`), selected with ``algorithm.adv_estimator=...``.

verl imports it by itself: the package declares it under verl's ``verl.plugins`` entry point,
which ``import verl`` loads. The trainer that carries exact group statistics to ``etr``,
``pmpo`` and ``apmpo`` is a second entry point, :mod:`.trainer` (``trainer.v1.trainer_mode=rlvr``).
Hyperparameters: :mod:`.config`. A command line's rlvr settings, checked on a CPU before a GPU
run: ``python -m rlvr.engines.verl.check <main_ppo's overrides>`` (:mod:`.check`).
"""

import contextlib
import importlib.metadata
import warnings

from rlvr.engines import require

require("verl", "verl")

TESTED_VERL = "0.9."
"""The verl series the adapters follow (its ``agg_loss`` scaling, its v1 trainer registry)."""


def check_verl(version: str) -> None:
    """Warn when ``version`` is not the tested series: the losses reproduce verl 0.9's scaling
    of micro-batch losses, which another version may change."""
    if not version.startswith(TESTED_VERL):
        warnings.warn(
            f"rlvr's verl adapters are tested with verl {TESTED_VERL}x, not {version}: check "
            "that rlvr_grpo still equals verl's vanilla loss (tests/engines/verl)",
            stacklevel=2,
        )


with contextlib.suppress(importlib.metadata.PackageNotFoundError):  # a checkout: no version
    check_verl(importlib.metadata.version("verl"))

from rlvr.engines.verl.advantages import ESTIMATORS  # noqa: E402
from rlvr.engines.verl.config import objective_config  # noqa: E402
from rlvr.engines.verl.losses import (  # noqa: E402
    EXACT_ROUTE,
    LOSSES,
    PolicyLossConfig,
    row_stats,
    step_counts,
)

__all__ = [
    "ESTIMATORS",
    "EXACT_ROUTE",
    "LOSSES",
    "PolicyLossConfig",
    "objective_config",
    "row_stats",
    "check_verl",
    "step_counts",
]
