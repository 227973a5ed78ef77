"""The registry of objectives: name -> :class:`ObjectiveSpec` (config, defaults, loss)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from rlvr.advantages import ADVANTAGE_MODES
from rlvr.builtins import did_you_mean, import_own, origin, same_function
from rlvr.objectives.aggregation import LOSS_AGG_MODES
from rlvr.objectives.base import ObjectiveOutput, PolicyBatch


@dataclass(frozen=True)
class ObjectiveSpec:
    """Everything a trainer needs to know about one objective."""

    name: str
    """Registry name (``grpo``, ``abc_grpo``, ...)."""
    config_cls: type
    """Frozen dataclass of its hyperparameters (defaults from ``ALGORITHMS.md``)."""
    loss_fn: Callable[[PolicyBatch, Any], ObjectiveOutput]
    """``(batch, config) -> ObjectiveOutput``, a pure function."""
    advantage_mode: str
    """Default advantage mode for :func:`rlvr.advantages.compute_advantages`."""
    loss_agg: str
    """Default aggregation mode."""
    needs_group_stats: bool
    """True when it reads per-sample group statistics (so needs rewards or ``group_stats``)."""
    sequence_level: bool
    """True when its loss is per sequence (repeated on the row's tokens)."""
    paper: str
    """Source and equations."""

    @property
    def needs_rewards(self) -> bool:
        """Rewards (or precomputed ``group_stats``) must be passed to ``policy_loss``."""
        return self.needs_group_stats

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        """Valid hyperparameter names."""
        return tuple(f.name for f in fields(self.config_cls))


OBJECTIVES: dict[str, ObjectiveSpec] = {}
"""Every registered objective by name, in the order registered (the package imports every
built-in objective's module, each registering itself)."""


def register_objective(
    name: str,
    *,
    config: type,
    advantage: str,
    loss_agg: str,
    paper: str,
    group_stats: bool = False,
    sequence_level: bool = False,
) -> Callable:
    """Decorator: register ``loss_fn(batch, config) -> ObjectiveOutput`` as objective ``name``,
    with ``config`` the frozen dataclass of its hyperparameters and the defaults it implies::

        @register_objective("mine", config=MineConfig, advantage="group_std",
                            loss_agg="token-mean", paper="Mine et al. eq. 3")
        def mine_loss(batch: PolicyBatch, cfg: MineConfig) -> ObjectiveOutput: ...

    ``group_stats=True``: the loss reads per-sample group statistics (``batch.stats``), with
    the options ``config.stats_options()`` returns; ``sequence_level=True``: its loss is per
    sequence, repeated on the row's tokens. One loss may serve several names (stacked
    decorators, one config class each). A name is registered once: another function under a
    taken name is refused (the same function again, its module reloaded, is not), and a name
    holds no ``.`` (``module.name`` finds yours).
    """
    if not name or "." in name:
        raise ValueError(f"objective name must be non-empty without '.', got {name!r}")
    if not dataclasses.is_dataclass(config):
        raise ValueError(f"objective {name!r}: config must be a dataclass, got {config!r}")
    if group_stats and not callable(getattr(config, "stats_options", None)):
        raise ValueError(
            f"objective {name!r}: group_stats=True needs a method {config.__name__}."
            "stats_options() returning the rlvr.advantages.StatsOptions it reads"
        )
    if advantage not in ADVANTAGE_MODES:
        raise ValueError(f"objective {name!r}: unknown advantage mode {advantage!r}")
    if loss_agg not in LOSS_AGG_MODES:
        raise ValueError(f"objective {name!r}: unknown loss_agg {loss_agg!r}")

    def wrap(loss_fn: Callable[[PolicyBatch, Any], ObjectiveOutput]) -> Callable:
        check_signature(name, loss_fn)
        taken = OBJECTIVES.get(name)
        if taken is not None and not same_function(taken.loss_fn, loss_fn):
            raise ValueError(
                f"objective {name!r} is already registered ({origin(taken.loss_fn)}); "
                f"register {origin(loss_fn)} under another name"
            )
        OBJECTIVES[name] = ObjectiveSpec(
            name, config, loss_fn, advantage, loss_agg, group_stats, sequence_level, paper
        )
        return loss_fn

    return wrap


def check_signature(name: str, loss_fn: Callable) -> None:
    """Refuse a loss that cannot be called as ``loss_fn(batch, config)``, at registration
    rather than on the first optimiser step."""
    try:
        signature = inspect.signature(loss_fn)
    except (TypeError, ValueError):  # a callable without a readable signature: left to the call
        return
    try:
        signature.bind(None, None)
    except TypeError:
        raise ValueError(
            f"objective {name!r}: {origin(loss_fn)} takes {signature}; an objective is called "
            "as loss_fn(batch, config)"
        ) from None


def objective_spec(name: str) -> ObjectiveSpec:
    """The spec of objective ``name``; a dotted name ``module.objective`` imports ``module``
    (yours, from ``PYTHONPATH`` or the working directory) and takes what it registers. An
    unknown name lists the valid ones."""
    if isinstance(name, str) and name in OBJECTIVES:
        return OBJECTIVES[name]
    if isinstance(name, str) and "." in name:
        module, _, registered = name.rpartition(".")
        if not import_own(module):
            raise ValueError(
                f"objective {name!r}: no module {module!r} to import (a file {module}.py in the "
                "working directory or on PYTHONPATH)"
            )
        if registered not in OBJECTIVES:
            raise ValueError(
                f"objective {name!r}: module {module!r} registers no {registered!r}; registered: "
                f"{', '.join(OBJECTIVES)}{did_you_mean(registered, OBJECTIVES)}"
            )
        return OBJECTIVES[registered]
    raise ValueError(
        f"unknown objective {name!r}; valid: {', '.join(OBJECTIVES)}, or module.name for one "
        f"your own module registers{did_you_mean(str(name), OBJECTIVES)}"
    )


def make_config(name: str, **hparams: Any) -> Any:
    """Objective ``name``'s config from ``hparams`` (validated; unknown names listed)."""
    spec = objective_spec(name)
    valid = spec.hyperparameters
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)} for objective {name!r}; "
            f"valid: {', '.join(valid)}"
        )
    return spec.config_cls(**hparams)


def resolve_config(spec: ObjectiveSpec, config: Any, hparams: dict[str, Any]) -> Any:
    """``config`` (checked to be ``spec``'s class) or a new one built from ``hparams``."""
    if config is None:
        return make_config(spec.name, **hparams)
    if hparams:
        raise ValueError(
            f"pass either config or hyperparameters, not both (got {', '.join(hparams)})"
        )
    if type(config) is not spec.config_cls:
        raise ValueError(
            f"config is a {type(config).__name__}; objective {spec.name!r} needs {spec.config_cls.__name__}"
        )
    return config
