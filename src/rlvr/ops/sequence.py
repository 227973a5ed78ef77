"""Response-token log-probs and entropy of a Hugging Face causal LM, in chunks.

:func:`sequence_token_stats` takes the rollout layout of :mod:`rlvr.generation`
(``input_ids = cat([prompt_ids, response_ids], 1)``: a left-padded prompt followed by a
right-padded response) and returns, for the last ``T`` columns, ``log p(token)`` and the
entropy of the next-token distribution, both ``[B, T]`` float32.

Two paths give the same numbers:

- ``"hidden"`` (default when safe): run the backbone (``model.get_decoder()``) for its
  ``last_hidden_state``, keep the ``T`` positions that predict response tokens, and apply
  :func:`~rlvr.ops.token_stats.token_logprobs_entropy` with the ``lm_head`` weight, so no
  ``[B, T, V]`` logits exist beyond one chunk.
- ``"logits"``: call the full model (``logits_to_keep = T + 1`` when the model accepts it)
  and reduce its logits with :func:`~rlvr.ops.token_stats.logprobs_entropy_from_logits`.
  Used for models that transform logits after ``lm_head``; those are recognised by any of
  the config attributes in :data:`LOGIT_TRANSFORM_ATTRS` being set to a non-neutral value
  (on the config or its text sub-config), by an output embedding that is not a plain
  ``nn.Linear``, or by a decoder that is the model itself.

With ``share_prompt=True`` the hidden path runs on :func:`~rlvr.ops.packing.pack_by_prompt`'s
layout instead (each distinct prompt once, no padding; same log-probs and gradients) for
models whose forward it reproduces (:func:`share_prompt_blocker`, then a one-time check
against the padded layout); other models keep the padded layout, with a warning.

Position ids are those HF ``generate`` uses for a left-padded batch,
``cumsum(attention_mask) - 1`` with pad positions set to 0, so the log-probs match the
sampler's. Temperature divides the logits, as the sampler does before drawing a token.
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from typing import Literal

import torch
from torch import nn

from rlvr.ops.packing import PackedRows, pack_by_prompt, packable
from rlvr.ops.token_stats import (
    DEFAULT_CHUNK_SIZE,
    TokenStats,
    logprobs_entropy_from_logits,
    token_logprobs_entropy,
)

HeadPath = Literal["auto", "hidden", "logits"]

LOGIT_TRANSFORM_ATTRS: dict[str, float | None] = {
    "final_logit_softcapping": None,  # Gemma 2/3, tanh soft-cap
    "logits_soft_cap": None,  # RecurrentGemma
    "logit_scale": 1.0,  # Cohere: logits * logit_scale
    "logits_scaling": 1.0,  # Granite: logits / logits_scaling; HyperCLOVA X: logits * it
    "lm_head_multiplier": 1.0,  # Falcon-H1
    "output_multiplier": 1.0,  # muP-style output scaling
    "unpadded_vocab_size": None,  # logits sliced to a smaller vocabulary
}
"""Config attribute -> its neutral value; any other value (``None``/0 = off) forces ``"logits"``."""


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] 0/1 mask -> [B, L] int64 positions ``cumsum - 1``, pad positions set to 0."""
    mask = attention_mask.long()
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _transforms_logits(config) -> str | None:
    """Name of the first attribute in :data:`LOGIT_TRANSFORM_ATTRS` set to a non-neutral value."""
    configs = [config]
    if hasattr(config, "get_text_config"):
        configs.append(config.get_text_config())
    for cfg in configs:
        for name, neutral in LOGIT_TRANSFORM_ATTRS.items():
            value = getattr(cfg, name, None)
            if value is not None and value != 0 and value != neutral:
                return name
    return None


def head_path(model) -> Literal["hidden", "logits"]:
    """``"hidden"`` when the logits are exactly ``lm_head(decoder(...).last_hidden_state)``."""
    head = model.get_output_embeddings()
    if not isinstance(head, nn.Linear) or _transforms_logits(model.config) is not None:
        return "logits"
    return "logits" if model.get_decoder() is model else "hidden"


def _check_inputs(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, num_response_tokens: int
) -> None:
    """Raise ValueError for shapes that cannot hold a prompt plus ``T`` response tokens."""
    if input_ids.dim() != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"input_ids and attention_mask must both be [B, L], got {list(input_ids.shape)} "
            f"and {list(attention_mask.shape)}"
        )
    if not 1 <= num_response_tokens < input_ids.shape[1]:
        raise ValueError(
            f"num_response_tokens must be in [1, L - 1] = [1, {input_ids.shape[1] - 1}] "
            f"(at least one prompt column precedes the response), got {num_response_tokens}"
        )


def _hidden_stats(model, input_ids, attention_mask, position_ids, t: int, **kw) -> TokenStats:
    """Backbone -> last_hidden_state -> chunked head on the ``T`` predicting positions."""
    out = model.get_decoder()(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
    )
    hidden = out.last_hidden_state[:, -t - 1 : -1]  # [B, T, H]: position i predicts token i + 1
    b, _, h = hidden.shape
    head = model.get_output_embeddings()
    labels = input_ids[:, -t:].reshape(-1)  # [B * T]
    stats = token_logprobs_entropy(
        hidden.reshape(b * t, h), head.weight, labels, bias=head.bias, **kw
    )
    ent = None if stats.entropy is None else stats.entropy.view(b, t)
    return TokenStats(stats.logp.view(b, t), ent)


def _logits_stats(model, input_ids, attention_mask, position_ids, t: int, **kw) -> TokenStats:
    """Full model forward (last ``T + 1`` positions when possible) -> chunked log-softmax."""
    extra = {}
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        extra["logits_to_keep"] = t + 1
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
        **extra,
    )
    logits = out.logits[:, -t - 1 : -1]  # [B, T, V]
    return logprobs_entropy_from_logits(logits, input_ids[:, -t:], **kw)


MASK_IMPLEMENTATIONS = ("sdpa", "eager")
"""Attention implementations that take the packed layout's ``[R, 1, L, L]`` mask as given."""


def share_prompt_blocker(model) -> str | None:
    """Why the packed layout cannot reproduce ``model``'s forward, or ``None`` when it can.

    It needs the hidden path (:func:`head_path`), an attention implementation that uses
    a given 4-D mask as is, and full attention in every layer (a sliding window would
    see other positions in the packed row than in the padded one).
    """
    config = model.config
    if head_path(model) != "hidden":
        return "its logits are not lm_head(hidden states)"
    impl = getattr(config, "_attn_implementation", None)
    if impl not in MASK_IMPLEMENTATIONS:
        return f"attention implementation {impl!r} is not one of {list(MASK_IMPLEMENTATIONS)}"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    if layer_types is not None:
        if any(kind != "full_attention" for kind in layer_types):
            return "not every layer is full attention"
    elif getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return "it uses sliding-window attention"
    return None


_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""model -> whether the packed layout reproduced its padded-layout log-probs (checked once)."""

_CHECK_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3}
"""Largest log-prob difference the one-time check accepts; 0.1 for 16-bit parameters."""


def _share_prompt(model, input_ids, attention_mask, t: int) -> bool:
    """Whether to use the packed layout for this batch (warns once per model when not)."""
    if not packable(attention_mask, t):
        return False
    if model not in _VERIFIED:
        reason = share_prompt_blocker(model) or _check_packed(model, input_ids, attention_mask, t)
        if reason is not None:
            warnings.warn(
                f"model.share_prompt: each prompt is computed once per row instead, because {reason}",
                stacklevel=3,
            )
        _VERIFIED[model] = reason is None
    return _VERIFIED[model]


def _check_packed(model, input_ids, attention_mask, t: int) -> str | None:
    """Compare both layouts on a few rows of this batch (no autocast, no gradient)."""
    rows = torch.arange(min(3, input_ids.shape[0]), device=input_ids.device)
    ids, mask = input_ids[rows], attention_mask[rows]
    dtype = model.get_output_embeddings().weight.dtype
    with torch.no_grad(), torch.autocast(ids.device.type, enabled=False):
        padded = _hidden_stats(
            model,
            ids,
            mask,
            position_ids_from_mask(mask),
            t,
            temperature=1.0,
            chunk_size=DEFAULT_CHUNK_SIZE,
            compute_entropy=False,
        ).logp
        packed = _packed_stats(
            model,
            pack_by_prompt(ids, mask, t),
            temperature=1.0,
            chunk_size=DEFAULT_CHUNK_SIZE,
            compute_entropy=False,
        ).logp
    on = mask[:, -t:].bool()
    gap = float((padded - packed)[on].abs().max())
    tolerance = _CHECK_TOLERANCE.get(dtype, 0.1)
    if not gap <= tolerance:
        return f"the packed layout's log-probs differ by {gap:.3g} (> {tolerance}) on this model"
    return None


def packed_attention_mask(model, allowed: torch.Tensor) -> torch.Tensor:
    """The ``[R, 1, L, L]`` mask of ``allowed`` in the form the model's attention adds.

    0 where allowed; elsewhere ``-inf`` for ``sdpa`` (what it turns a boolean mask into,
    done here once: given booleans, it converts and keeps a float copy in every layer) and
    the dtype's minimum for ``eager``, as Hugging Face builds its own masks.
    """
    dtype = model.get_input_embeddings().weight.dtype
    fill = float("-inf") if model.config._attn_implementation == "sdpa" else torch.finfo(dtype).min
    blocked = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return blocked.masked_fill_(~allowed, fill)[:, None]


def _packed_stats(model, packed: PackedRows, **kw) -> TokenStats:
    """Backbone over the packed rows -> the predicting positions -> chunked head -> [B, T]."""
    out = model.get_decoder()(
        input_ids=packed.input_ids,
        attention_mask=packed_attention_mask(model, packed.allowed),
        position_ids=packed.position_ids,
        use_cache=False,
    )
    hidden = out.last_hidden_state
    hidden = hidden.reshape(-1, hidden.shape[-1]).index_select(0, packed.source)  # [N, H]
    head = model.get_output_embeddings()
    stats = token_logprobs_entropy(hidden, head.weight, packed.labels, bias=head.bias, **kw)
    entropy = None if stats.entropy is None else packed.unpack(stats.entropy)
    return TokenStats(packed.unpack(stats.logp), entropy)


def sequence_token_stats(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_response_tokens: int,
    *,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    compute_entropy: bool = True,
    path: HeadPath = "auto",
    share_prompt: bool = False,
) -> TokenStats:
    """Log-probs and entropy of the last ``T = num_response_tokens`` columns of ``input_ids``.

    Args:
        model: a Hugging Face causal LM (``get_decoder``, ``get_output_embeddings``).
        input_ids: [B, L] ``cat([prompt_ids, response_ids], 1)``; prompt left-padded,
            response right-padded (padded positions get values; mask them downstream).
        attention_mask: [B, L] ``cat([prompt_mask, response_mask], 1)``.
        num_response_tokens: T, the response width; ``1 <= T < L``.
        temperature: logits are divided by it (pass the sampling temperature).
        chunk_size: rows of ``B * T`` per chunk of float32 logits.
        compute_entropy: when False, ``entropy`` is None.
        path: ``"auto"`` picks :func:`head_path`; ``"hidden"``/``"logits"`` force one.
        share_prompt: compute each distinct prompt once and no padding
            (:mod:`rlvr.ops.packing`) where the model allows it; the statistics on
            padding (``attention_mask`` 0) are then 0 instead of values to be masked.

    Returns:
        ``TokenStats(logp [B, T] float32, entropy [B, T] float32 | None)`` with gradients
        to the model's parameters when grad mode is on.
    """
    _check_inputs(input_ids, attention_mask, num_response_tokens)
    if path not in ("auto", "hidden", "logits"):
        raise ValueError(f"path must be one of 'auto', 'hidden', 'logits', got {path!r}")
    kw = {"temperature": temperature, "chunk_size": chunk_size, "compute_entropy": compute_entropy}
    chosen = head_path(model) if path == "auto" else path
    if (
        share_prompt
        and _share_prompt(model, input_ids, attention_mask, num_response_tokens)
        and chosen == "hidden"
    ):
        return _packed_stats(
            model, pack_by_prompt(input_ids, attention_mask, num_response_tokens), **kw
        )
    fn = _hidden_stats if chosen == "hidden" else _logits_stats
    return fn(
        model,
        input_ids,
        attention_mask,
        position_ids_from_mask(attention_mask),
        num_response_tokens,
        **kw,
    )
