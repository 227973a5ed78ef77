"""Adapters that run rlvr's objectives inside other RL engines (``docs/engines.md``).

- :mod:`rlvr.engines.verl`: every objective as a verl ``loss_mode`` (``rlvr_<name>``), rlvr's
  advantage modes as verl advantage estimators, and a trainer mode (``trainer.v1.trainer_mode=rlvr``)
  that carries exact group statistics to the loss. Loaded by verl through its ``verl.plugins``
  entry point; needs ``pip install "rlvr[verl]"``.
- :mod:`rlvr.engines.trl`: :class:`~rlvr.engines.trl.RlvrGRPOTrainer`, a drop-in for TRL's
  ``GRPOTrainer`` whose loss is :func:`rlvr.objectives.objective_loss`; needs
  ``pip install "rlvr[trl]"``.

The engines are optional dependencies: nothing here is imported by ``import rlvr``.
"""

from __future__ import annotations

import importlib


def require(module: str, name: str) -> None:
    """Import engine ``module`` (also the name of rlvr's extra for it), or stop with one line
    naming that extra: the adapters need the engine, which ``import rlvr`` does not install."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise ModuleNotFoundError(
            f'rlvr.engines.{module} needs {name}: pip install "rlvr[{module}]"', name=module
        ) from err
