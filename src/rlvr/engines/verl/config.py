"""Where an rlvr objective's hyperparameters come from inside verl.

verl hands a registered policy loss only its actor config (``actor_rollout_ref.actor``), which
travels with the rest of verl's config to every Ray worker. So:

- Hyperparameters verl already has come from verl's own fields: ``eps_low`` from
  ``clip_ratio_low``, ``eps_high`` from ``clip_ratio_high`` (each falling back to
  ``clip_ratio`` when ``null``; verl's config sets both), the dual clip ``clip_c`` from ``clip_ratio_c``, for the objectives that
  have them (``grpo``, ``dapo``, ``dr_grpo``, ``gppo``, ``cispo``, ``gspo``, ``gmpo``,
  ``pmpo``, ``apmpo``). The aggregation is verl's ``loss_agg_mode``.
- The rest (``eps1..eps4``, ``lam1``, ``gamma``, ...) go in one extra section,
  ``actor_rollout_ref.actor.policy_loss.rlvr``, which verl's config accepts once
  ``policy_loss._target_`` names :class:`rlvr.engines.verl.PolicyLossConfig`::

      actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig
      +actor_rollout_ref.actor.policy_loss.rlvr.eps3=0.3

Setting in ``rlvr`` a value verl has a field for is an error naming the field, and so is a
verl clip ratio other than its default for an objective that has no such width (``abc_grpo``,
``etr``) or does not read it (``apmpo``'s ``clip_ratio_high``, and ``clip_ratio_low`` with
``adaptive_lower``), and a ``clip_ratio_c`` other than 3 (or ``inf``) for an objective without
a dual clip: nothing the user set is silently ignored.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr.objectives import ApmpoConfig, ObjectiveConfig, make_config, objective_spec

PREFIX = "rlvr_"
"""Registered verl loss modes and advantage estimators are rlvr's names with this prefix."""

VERL_FIELDS = {"eps_low": "clip_ratio_low", "eps_high": "clip_ratio_high", "clip_c": "clip_ratio_c"}
"""rlvr hyperparameter -> the verl actor field it is read from."""

VERL_ELSEWHERE = {
    "kl_coef": "set actor.use_kl_loss=True and actor.kl_loss_coef (verl's KL term)",
    "kl_estimator": "set actor.kl_loss_type (verl's KL term)",
    "entropy_coef": "set actor.entropy_coeff (verl's entropy term)",
    "loss_agg": "set actor.loss_agg_mode",
    "advantage": "set algorithm.adv_estimator=rlvr_<mode>",
    "sft_coef": "rlvr's SFT-on-positives term is not available on verl",
    "sft_threshold": "rlvr's SFT-on-positives term is not available on verl",
}
"""rlvr's :class:`~rlvr.objectives.ObjectiveConfig` settings (not an objective's
hyperparameters) -> what to do on verl instead."""

VERL_DEFAULT_CLIP = 0.2
"""verl's default ``clip_ratio``/``clip_ratio_low``/``clip_ratio_high``."""

VERL_DEFAULT_CLIP_C = 3.0
"""verl's default ``clip_ratio_c`` (the dual clip)."""


def check_section(loss_mode: str, section: Any) -> None:
    """What ``policy_loss`` alone tells, checked where verl builds it (on the driver, in its
    ``validate_config``, before any worker starts): the objective's name, the names and values
    of the ``rlvr`` section, and that the section belongs to an rlvr loss. The values verl's own
    fields give are checked with them at the first loss call (:func:`objective_config`)."""
    own = _section_values(section)
    name = objective_name(loss_mode)
    if name is None:
        if own:
            raise ValueError(
                f"policy_loss.rlvr sets {', '.join(sorted(own))}, but loss_mode={loss_mode!r} is "
                f"not an rlvr loss ({PREFIX}<objective>), which would ignore it"
            )
        return
    _refuse_verl_fields(own, objective_spec(name).hyperparameters)
    make_config(name, **own)


def check_policy_loss_keys(keys: set[str], known: set[str]) -> None:
    """Refuse a key of ``policy_loss`` that is not one of its fields (``known``), pointing to
    where it goes: an objective's hyperparameter set as ``policy_loss.eps3`` belongs in
    ``policy_loss.rlvr``, a width verl has a field for in that field."""
    for key in sorted(keys - known):
        if key in VERL_FIELDS or key in VERL_ELSEWHERE:
            where = VERL_ELSEWHERE.get(key, f"set actor.{VERL_FIELDS.get(key)}")
        else:
            where = (
                "an rlvr objective's hyperparameters go in policy_loss.rlvr "
                f"(+actor_rollout_ref.actor.policy_loss.rlvr.{key}=...)"
            )
        raise ValueError(f"policy_loss has no key {key!r}: {where}")


def _refuse_verl_fields(own: dict[str, Any], hyperparameters: tuple[str, ...]) -> None:
    """Refuse in ``policy_loss.rlvr`` a width verl has a field for, and a setting of rlvr's that
    is verl's on verl (``kl_coef``...) unless the objective has a hyperparameter of that name."""
    for key in sorted(set(own) & set(VERL_FIELDS)):
        raise ValueError(
            f"policy_loss.rlvr.{key}: under verl, {key} is read from actor.{VERL_FIELDS[key]}; "
            "set it there"
        )
    for key in sorted(set(own) & set(VERL_ELSEWHERE) - set(hyperparameters)):
        raise ValueError(f"policy_loss.rlvr.{key} is not an objective's: {VERL_ELSEWHERE[key]}")


def objective_name(loss_mode: str) -> str | None:
    """The rlvr objective behind a verl ``loss_mode`` (``rlvr_abc_grpo`` -> ``abc_grpo``), else None."""
    if not isinstance(loss_mode, str) or not loss_mode.startswith(PREFIX):
        return None
    return objective_spec(loss_mode[len(PREFIX) :]).name


def _get(config: Any, key: str, default: Any = None) -> Any:
    """``config.key`` for verl's dataclass configs and OmegaConf/dict sections alike."""
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


def verl_hyperparameters(actor: Any) -> dict[str, float]:
    """The clip widths verl's actor config sets: ``eps_low``, ``eps_high``, ``clip_c``."""
    clip = _get(actor, "clip_ratio", VERL_DEFAULT_CLIP)
    return {
        "eps_low": float(_get(actor, "clip_ratio_low", clip)),
        "eps_high": float(_get(actor, "clip_ratio_high", clip)),
        "clip_c": float(_get(actor, "clip_ratio_c", 3.0)),
    }


def own_hyperparameters(actor: Any) -> dict[str, Any]:
    """The ``policy_loss.rlvr`` section (empty without it)."""
    return _section_values(_get(_get(actor, "policy_loss", {}), "rlvr", {}))


def _section_values(section: Any) -> dict[str, Any]:
    """An ``rlvr`` section (a dict, an OmegaConf node or None) as plain ``{name: value}``."""
    return {str(key): _plain(value) for key, value in dict(section or {}).items()}


def _plain(value: Any) -> Any:
    """OmegaConf lists (``reward_range=[-1,1]``) as tuples, the way the configs expect them."""
    return (
        tuple(value)
        if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig"
        else value
    )


def objective_config(name: str, actor: Any, loss_agg: str | None = None) -> ObjectiveConfig:
    """The :class:`ObjectiveConfig` of objective ``name`` as verl's ``actor`` config sets it up.

    Raises ValueError for an unknown objective or hyperparameter, a value given both in
    ``policy_loss.rlvr`` and in verl's own field, or a verl clip ratio the objective cannot use.
    """
    spec = objective_spec(name)
    own = own_hyperparameters(actor)
    verl = {k: v for k, v in verl_hyperparameters(actor).items() if k in spec.hyperparameters}
    _refuse_verl_fields(own, spec.hyperparameters)
    _refuse_unread_clip_ratio(actor)
    if "eps_low" not in spec.hyperparameters:
        _refuse_clip_ratios(name, actor, spec.hyperparameters)
    if "clip_c" not in spec.hyperparameters:
        _refuse_dual_clip(name, actor)
    ignored = ignored_widths(make_config(name, **own))
    _refuse_ignored_widths(name, ignored, verl)
    used = {k: v for k, v in verl.items() if k not in ignored}
    return ObjectiveConfig(name, params=make_config(name, **used, **own), loss_agg=loss_agg)


def ignored_widths(params: Any) -> tuple[str, ...]:
    """The widths verl would set that the objective's loss does not read
    (:meth:`rlvr.objectives.ApmpoConfig.unread_widths`)."""
    return params.unread_widths() if isinstance(params, ApmpoConfig) else ()


def _refuse_ignored_widths(name: str, ignored: tuple[str, ...], verl: dict[str, float]) -> None:
    for key in ignored:
        if verl[key] != VERL_DEFAULT_CLIP:
            raise ValueError(
                f"{PREFIX}{name} does not read actor.{VERL_FIELDS[key]} (got {verl[key]}): its "
                "adaptive width eps_ada is set by policy_loss.rlvr.eps_min and eps_max"
            )


def _refuse_unread_clip_ratio(actor: Any) -> None:
    """``clip_ratio`` only stands in for an unset ``clip_ratio_low``/``high``, and verl's config
    sets both (to 0.2): there, as in verl's own losses, it is read by no objective."""
    clip, low, high = (_get(actor, k) for k in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"))
    if clip not in (None, VERL_DEFAULT_CLIP) and low is not None and high is not None:
        raise ValueError(
            f"actor.clip_ratio={clip} is not read: actor.clip_ratio_low and clip_ratio_high are "
            f"set ({low}, {high}; verl's defaults); set those instead"
        )


def _refuse_dual_clip(name: str, actor: Any) -> None:
    """A dual clip set for an objective that has none (verl's default 3, or ``inf``: off, pass)."""
    clip_c = verl_hyperparameters(actor)["clip_c"]
    if clip_c not in (VERL_DEFAULT_CLIP_C, math.inf):
        raise ValueError(
            f"{PREFIX}{name} has no dual clip, so actor.clip_ratio_c={clip_c} would be ignored; "
            f"leave it at verl's default {VERL_DEFAULT_CLIP_C} (or inf)"
        )


def _refuse_clip_ratios(name: str, actor: Any, valid: tuple[str, ...]) -> None:
    ratios = verl_hyperparameters(actor)
    if (ratios["eps_low"], ratios["eps_high"]) != (VERL_DEFAULT_CLIP, VERL_DEFAULT_CLIP):
        raise ValueError(
            f"{PREFIX}{name} has no clip_ratio_low/clip_ratio_high (got {ratios['eps_low']}, "
            f"{ratios['eps_high']}); its widths are policy_loss.rlvr.{{{', '.join(valid)}}}"
        )
