"""rlvr's objectives inside TRL: :class:`RlvrGRPOTrainer` drops in for ``trl.GRPOTrainer``.

``pip install "rlvr[trl]"``; ``docs/engines.md`` has a script and what differs from TRL's own
losses and from rlvr's trainer.
"""

from rlvr.engines import require

require("trl", "TRL")

from rlvr.engines.trl.options import REFUSED, check_args, objective_config  # noqa: E402
from rlvr.engines.trl.rewards import verifier_reward  # noqa: E402
from rlvr.engines.trl.trainer import RlvrGRPOTrainer  # noqa: E402

__all__ = ["REFUSED", "RlvrGRPOTrainer", "check_args", "objective_config", "verifier_reward"]
