"""Check a verl command line's rlvr settings on a CPU, before the GPU run.

    python -m rlvr.engines.verl.check actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo \\
        actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig ...

takes ``main_ppo``'s overrides, composes them with verl's ``ppo_trainer`` config as ``main_ppo``
does, and runs what would otherwise first run on a GPU worker: the objective's config as the
loss builds it from the actor config at its first call (the clip-ratio checks), the loss mode
and estimator looked up in verl's registries, and the trainer mode an objective reading group
statistics needs. Prints the objective, its hyperparameters, aggregation and estimator, with a
``note:`` line for each that is not the objective's default; exits 1 with one ``error:`` line.
It starts no Ray, loads no model and reads no data.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

from rlvr.engines.verl.config import PREFIX, VERL_FIELDS, objective_config, objective_name

CONFIG_MODULE = "verl.trainer.config"
CONFIG_NAME = "ppo_trainer"
"""The config ``python -m verl.trainer.main_ppo`` composes."""

TARGET = "rlvr.engines.verl.PolicyLossConfig"
"""The ``policy_loss._target_`` that gives verl's config the ``rlvr`` section."""


def compose(overrides: list[str]) -> Any:
    """verl's ``ppo_trainer`` config with ``overrides`` (Hydra's syntax, as on the command line)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(CONFIG_MODULE, version_base=None):
        return hydra_compose(CONFIG_NAME, overrides=overrides)


def check(config: Any) -> list[str]:
    """The report lines for verl's composed ``config``; ValueError for what would stop the run."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn
    from verl.utils.config import omega_conf_to_dataclass

    policy_loss = config.actor_rollout_ref.actor.policy_loss
    if "rlvr" in policy_loss and policy_loss.get("_target_") != TARGET:
        raise ValueError(
            f"policy_loss.rlvr needs actor_rollout_ref.actor.policy_loss._target_={TARGET} "
            "(verl's own policy_loss has no rlvr section)"
        )
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    loss_mode, estimator = actor.policy_loss.loss_mode, config.algorithm.adv_estimator
    name = objective_name(loss_mode)
    get_policy_loss_fn(loss_mode)
    get_adv_estimator_fn(estimator)
    if name is None:
        return [f"loss_mode={loss_mode} is verl's own; nothing of rlvr's to check"]
    cfg = objective_config(name, actor, loss_agg=actor.loss_agg_mode)
    mode, v1 = config.trainer.v1.trainer_mode, config.trainer.use_v1
    if (config.algorithm.get("rollout_correction") or {}).get("bypass_mode") and not v1:
        raise ValueError(
            f"{loss_mode} with algorithm.rollout_correction.bypass_mode=True on verl's legacy "
            "trainer (trainer.use_v1=False): that trainer swaps in its own bypass_mode loss, "
            "so no rlvr objective would train; use trainer.use_v1=True"
        )
    if cfg.spec.needs_group_stats and (mode != "rlvr" or not v1):
        raise ValueError(
            f"{loss_mode} needs whole groups' statistics: add trainer.v1.trainer_mode=rlvr, "
            f"on verl's v1 trainer (got trainer_mode={mode}, use_v1={v1})"
        )
    values = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(cfg.params).items())
    lines = [
        f"{loss_mode}: {cfg.spec.paper}",
        f"hyperparameters: {values}",
        *_default_notes(cfg, actor.loss_agg_mode, estimator, config.algorithm),
        *_width_notes(cfg),
    ]
    if actor.loss_agg_mode == "seq-mean-token-sum-norm" and actor.loss_scale_factor is None:
        lines.append(
            "note: seq-mean-token-sum-norm without actor_rollout_ref.actor.loss_scale_factor "
            "divides each micro-batch by its own longest response (Dr.GRPO's L_max: set it to "
            "data.max_response_length)"
        )
    return lines


def _same_as(estimator: str, algorithm: Any) -> str:
    """The rlvr estimator verl's ``estimator`` equals, else ``estimator`` itself: verl's ``grpo``
    with ``norm_adv_by_std_in_grpo=False`` is ``rlvr_group_mean``."""
    if estimator == "grpo" and not algorithm.get("norm_adv_by_std_in_grpo", True):
        return f"{PREFIX}group_mean"
    return estimator


def _default_notes(cfg: Any, agg: str, estimator: str, algorithm: Any) -> list[str]:
    """``aggregation``/``advantages`` lines, with a note where they are not the objective's."""
    same = _same_as(estimator, algorithm)
    shown = (
        estimator if same == estimator else f"{estimator} (norm_adv_by_std_in_grpo=False: {same})"
    )
    lines = [f"aggregation: {agg}", f"advantages: {shown}"]
    want_est = f"{PREFIX}{cfg.spec.advantage_mode}"
    if agg != cfg.spec.loss_agg:
        lines.append(
            f"note: {cfg.name}'s own aggregation is {cfg.spec.loss_agg} "
            f"(actor_rollout_ref.actor.loss_agg_mode={cfg.spec.loss_agg})"
        )
    if same != want_est:
        critic = ", which trains a critic" if estimator == "gae" else ""
        whose = "" if estimator.startswith(PREFIX) else "verl's "
        lines.append(
            f"note: the advantages are {whose}{estimator}{critic}; {cfg.name}'s own are "
            f"algorithm.adv_estimator={want_est}"
        )
    return lines


def _width_notes(cfg: Any) -> list[str]:
    """A note for each width verl's actor config sets to other than the objective's default
    (verl's 0.2 for GSPO's 3e-4, its dual clip ``clip_ratio_c=3`` for GRPO's none)."""
    own = cfg.spec.config_cls()
    notes = []
    for key, field in VERL_FIELDS.items():
        if key not in cfg.spec.hyperparameters:
            continue
        value, default = (getattr(p, key) for p in (cfg.params, own))
        if (math.inf if value is None else value) != (math.inf if default is None else default):
            own_text = f"none (actor.{field}=inf)" if default is None else default
            notes.append(
                f"note: {key}={value} from actor.{field}; {cfg.name}'s own default is {own_text}"
            )
    return notes


def _message(error: BaseException) -> str:
    """One line: the config class's own error under Hydra's wrapping, else the error's first
    two lines (Hydra's override errors say how to fix them on the second)."""
    from hydra.errors import InstantiationException

    while isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    return " ".join(str(error).strip().splitlines()[:2]) or type(error).__name__


def main(argv: list[str] | None = None) -> int:
    """Check the overrides ``argv`` (``sys.argv[1:]``); 0 when the run would start, else 1."""
    from hydra.errors import HydraException

    overrides = list(sys.argv[1:] if argv is None else argv)
    try:
        lines = check(compose(overrides))
    except (ValueError, TypeError, AssertionError, HydraException) as error:
        print(f"error: {_message(error)}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
