"""Objective contrast: where, and how much, two objectives' updates differ on the same batch.

Every objective's loss depends on the model only through the response log-probs, so its
parameter gradient is ``J^T w`` with ``J = dlogp/dtheta`` shared by all objectives and the
per-token weight ``w_t = dL/dlogp_t`` its own. Comparing ``w`` of the run's objective with
``w'`` of another on the *same* micro-batch (same tokens, ratios, advantages, step counts)
says exactly on which tokens and by how much the two updates differ, free of seed noise.
Both are autograd gradients to a detached copy of the log-probs: no extra pass through
the model.

Per named objective, over a step's response tokens (``docs/metrics.md``):

- ``contrast/<name>/token_frac``: share of response tokens whose weights differ beyond a
  relative ``REL_TOL`` (``|w - w'| > REL_TOL * max(|w|, |w'|)``);
- ``contrast/<name>/q1_frac`` .. ``q4_frac``: the same by quadrant (``Q1: A>0, r>1``,
  ``Q2: A>0, r<1``, ``Q3: A<0, r<1``, ``Q4: A<0, r>1``; ``r = 1`` and ``A = 0`` belong to no
  quadrant), so they sum to at most ``token_frac``;
- ``contrast/<name>/rel_l2``: ``||w - w'|| / ||w||`` over the step's tokens.

A name is an objective with its default hyperparameters (``grpo``) or with some set
(``apmpo:fss_form=mean,gamma=0``); its aggregation is its own default unless ``loss_agg``
is set (``advantage`` may be set but changes nothing: the advantages are the run's, the
batch is identical). The run's KL, SFT and entropy terms are kept in both, so they cancel
in the difference.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import torch
import yaml

from rlvr.objectives.aggregation import StepCounts
from rlvr.objectives.config import ObjectiveConfig
from rlvr.objectives.loss import LossInputs, objective_loss
from rlvr.objectives.registry import make_config

REL_TOL = 1e-6
"""Relative difference beyond which two tokens' weights count as different."""
PREFIX = "contrast/"
_SUMS = ("diff_sq", "w_sq")
_CONFIG_KEYS = ("loss_agg", "advantage")
_ITEMS = re.compile(r",(?=\s*[A-Za-z_]\w*\s*=)")
"""Commas that start a new ``key=`` (a value may hold commas: ``reward_range=[-1, 1]``)."""


@dataclass(frozen=True)
class Contrast:
    """One objective the run's is compared with."""

    label: str
    """The name as given (``grpo``, ``apmpo:fss_form=mean``): the metrics' key."""
    objective: ObjectiveConfig


def parse_contrast(spec: str, run: ObjectiveConfig) -> Contrast:
    """``name`` or ``name:key=value,...`` as a :class:`Contrast` with ``run``'s regularisers.

    >>> c = parse_contrast("abc_grpo:eps3=0.3", ObjectiveConfig())
    >>> c.objective.name, c.objective.params.eps3
    ('abc_grpo', 0.3)
    """
    name, _, rest = str(spec).partition(":")
    settings: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in _ITEMS.split(rest))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"log.contrast {spec!r}: expected name:key=value,... , got {item!r}")
        settings[key.strip()] = _setting(value)
    own = {k: settings.pop(k, None) for k in _CONFIG_KEYS}  # None: the objective's default
    try:
        params = make_config(name.strip(), **settings)
        objective = dataclasses.replace(run, name=name.strip(), params=params, **own)
    except (TypeError, ValueError) as err:
        raise ValueError(f"log.contrast {spec!r}: {err}") from err
    return Contrast(str(spec), objective)


def _setting(text: str) -> object:
    """A contrast setting's value: YAML, except that a number PyYAML reads as a string
    (``inf``, ``Infinity``, ``1e-5``) is a float, as in the run's own overrides."""
    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    return value


def token_weights(
    inputs: LossInputs, objective: ObjectiveConfig, counts: StepCounts | None
) -> torch.Tensor:
    """[B, T] ``dL/dlogp_t`` of ``objective``'s loss on ``inputs`` (no gradient reaches the model)."""
    leaf = inputs.logp.detach().requires_grad_()
    # The entropy bonus is kept as the run builds it, on a leaf of its own: it reaches the
    # model through the entropy, not the log-probs, so it adds nothing to dL/dlogp.
    entropy = None if inputs.entropy is None else inputs.entropy.detach().requires_grad_()
    with torch.enable_grad():
        batch = dataclasses.replace(inputs, logp=leaf, entropy=entropy)
        loss, _ = objective_loss(batch, objective, counts)
        (grad,) = torch.autograd.grad(loss, leaf, allow_unused=True)
    return torch.zeros_like(leaf) if grad is None else grad


def _quadrants(inputs: LossInputs, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    adv = inputs.advantages.detach()
    adv = adv[:, None].expand_as(mask) if adv.dim() == 1 else adv  # [B, T]
    log_ratio = (inputs.logp.detach() - inputs.old_logp.detach()).to(torch.float64)
    above, below = log_ratio > 0, log_ratio < 0
    pos, neg = mask & (adv > 0), mask & (adv < 0)
    return {"q1": pos & above, "q2": pos & below, "q3": neg & below, "q4": neg & above}


def contrast_metrics(
    inputs: LossInputs,
    run: ObjectiveConfig,
    contrasts: tuple[Contrast, ...],
    counts: StepCounts | None,
    group_stats: dict[str, object] | None = None,
) -> dict[str, torch.Tensor]:
    """The micro-batch's contrast metrics (detached 0-dim tensors, see the module doc).

    ``*_frac`` are means over this call's response tokens (a step weights them by tokens);
    ``contrast/<name>/diff_sq`` and ``w_sq`` are sums that :func:`finish` turns into ``rel_l2``.
    ``group_stats``: each contrast's own group statistics (label -> ``GroupStats``), for
    objectives that read them when the run's objective does not.
    """
    if not contrasts:
        return {}
    mask = inputs.mask > 0  # [B, T]
    tokens = mask.sum().clamp(min=1).to(torch.float64)
    w = token_weights(inputs, run, counts).to(torch.float64)
    quadrants = _quadrants(inputs, mask)
    out: dict[str, torch.Tensor] = {}
    for c in contrasts:
        stats = (group_stats or {}).get(c.label, inputs.group_stats)
        other = dataclasses.replace(inputs, group_stats=stats)
        w2 = token_weights(other, c.objective, counts).to(torch.float64)
        diff = torch.where(mask, w - w2, 0.0)
        differs = mask & (diff.abs() > REL_TOL * torch.maximum(w.abs(), w2.abs()))
        key = f"{PREFIX}{c.label}/"
        out[key + "token_frac"] = differs.sum() / tokens
        for q, inside in quadrants.items():
            out[key + f"{q}_frac"] = (differs & inside).sum() / tokens
        out[key + "diff_sq"] = diff.square().sum()
        out[key + "w_sq"] = torch.where(mask, w, 0.0).square().sum()
    return out


def is_sum(name: str) -> bool:
    """Whether ``name`` is one of the sums a step adds up rather than averages."""
    return name.startswith(PREFIX) and name.rsplit("/", 1)[-1] in _SUMS


def finish(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` with each contrast's summed ``diff_sq`` / ``w_sq`` replaced by ``rel_l2``."""
    out = {k: v for k, v in metrics.items() if not is_sum(k)}
    for name in metrics:
        if name.startswith(PREFIX) and name.endswith("/diff_sq"):
            key = name[: -len("diff_sq")]
            w_sq = metrics.get(key + "w_sq", 0.0)
            out[key + "rel_l2"] = (metrics[name] / w_sq) ** 0.5 if w_sq > 0 else 0.0
    return out
