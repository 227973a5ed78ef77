"""A lean forward pass for sampling from Llama-family models (Llama, Mistral, Qwen2, Qwen3,
SmolLM2).

Hugging Face's forward spends most of a decoding step on bookkeeping when the model is
small (mask construction, cache objects, module dispatch, output classes). This module
computes the same thing with a few tensor operations per layer, reading the model's own
weights: RMSNorm, rotary embeddings, grouped-query attention with a KV cache (Qwen3's
RMSNorm of each query and key head before the rotation), SwiGLU MLP, the final norm and the
LM head on the last position only.

A projection carrying LoRA adapters is computed with its adapters merged into one weight
(:class:`_Fixed`), equal to the adapted layer up to rounding. Under autocast the decoder
casts what autocast would cast at every step, once, to the same values: the weights when it
is made (autocast's cast cache is off in inference mode and skips frozen weights), each
block's input once for all its projections, and keys and values before they enter the
cache, which is thus kept in autocast's dtype. Only configurations it reproduces are
accepted (:func:`supports`); anything else (rotary scaling, sliding windows, other
activations, biases in the MLP, models in training mode, an embedding carrying adapters)
goes through the Hugging Face forward. Tests check the logits against Hugging Face's,
prefill and decoding, for each family.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rlvr.generation.base import product_dtype
from rlvr.ops.merged import is_adapted, merged_weight

SUPPORTED_TYPES = ("llama", "mistral", "qwen2", "qwen3")
_GQA_IN_SDPA = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


FEW_ROWS = 64
"""Up to this many rows (a decoding step) the MLP and the LM head run as ``W @ x.T``: on
CPU the matrix-product kernels handle a large first dimension much better than a small
one, and the MLP stays in that layout from its input to its output."""


def _plain(*modules: torch.nn.Module) -> bool:
    """No hooks on ``modules`` (hooks run only when a module is called)."""
    return not any(m._forward_hooks or m._forward_pre_hooks for m in modules)


def _weights_only(*modules) -> bool:
    """``modules`` are ``nn.Linear`` itself (or :class:`_Fixed`) without hooks: their weight
    alone is what calling them computes (a layer wrapped by an adapter is not)."""
    plain = all(type(m) is torch.nn.Linear or isinstance(m, _Fixed) for m in modules)
    return plain and _plain(*modules)


def _recast(weight: torch.Tensor, cast: torch.dtype | None) -> bool:
    """Whether autocast to ``cast`` (None: no autocast) casts ``weight``: it casts
    floating-point tensors other than float64 to ``cast`` at every call. (It keeps a cast
    for the rest of its block only of a float32 leaf that requires grad, and never in
    inference mode.)"""
    lower = cast is not None and weight.dtype not in (torch.float64, cast)
    return lower and weight.is_floating_point()


class _Fixed:
    """A linear layer as the weight and bias it computes with, made once per decoder: a layer
    carrying LoRA adapters as :func:`~rlvr.ops.merged.merged_weight` (its logits differ from
    ``W x + alpha / r * B (A x)`` by rounding only), and under autocast to ``cast`` weights
    cast as autocast would cast them, once instead of at every decoding step."""

    def __init__(
        self, weight: torch.Tensor, bias: torch.Tensor | None, cast: torch.dtype | None
    ) -> None:
        self.weight = weight.to(cast) if _recast(weight, cast) else weight
        self.bias = bias.to(cast) if bias is not None and _recast(bias, cast) else bias
        self._forward_hooks: dict = {}
        self._forward_pre_hooks: dict = {}

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def _projection(module: torch.nn.Module, cast: torch.dtype | None):
    """``module``, or a :class:`_Fixed` for a hook-free layer carrying LoRA adapters, or one
    whose weight autocast to ``cast`` would cast."""
    if is_adapted(module) and _plain(module, module.base_layer):
        return _Fixed(merged_weight(module), module.base_layer.bias, cast)
    if _weights_only(module) and _recast(module.weight, cast):
        return _Fixed(module.weight, module.bias, cast)
    return module


def _norm_weight(attention: torch.nn.Module, name: str) -> torch.Tensor | None:
    """The weight of ``attention``'s per-head RMSNorm ``name`` (Qwen3), or None."""
    norm = getattr(attention, name, None)
    return None if norm is None else norm.weight


def supports(model) -> bool:
    """Whether :class:`FastDecoder` computes exactly what ``model``'s forward does."""
    cfg = model.config
    inner = getattr(model, "model", None)
    rotary = getattr(inner, "rotary_emb", None)
    checks = (
        getattr(cfg, "model_type", None) in SUPPORTED_TYPES,
        getattr(cfg, "hidden_act", None) == "silu",
        not model.training,
        rotary is not None and getattr(rotary, "rope_type", None) == "default",
        getattr(rotary, "attention_scaling", 1.0) == 1.0,
        not getattr(cfg, "use_sliding_window", False),
        cfg.model_type != "mistral" or getattr(cfg, "sliding_window", None) is None,
        all(
            t == "full_attention" for t in (getattr(cfg, "layer_types", None) or ["full_attention"])
        ),
        getattr(cfg, "pretraining_tp", 1) == 1,
        not getattr(cfg, "mlp_bias", False),
        isinstance(getattr(model, "lm_head", None), torch.nn.Linear),
        # The decoder looks tokens up in this layer's weight: an embedding wrapped with LoRA
        # adapters (peft's lora.Embedding) computes more than that weight.
        isinstance(getattr(inner, "embed_tokens", None), torch.nn.Embedding),
        getattr(cfg, "quantization_config", None) is None,
        # Norms, attention, embeddings and layers are computed here, not called: a hook on
        # one of them (steering, analysis) would be skipped. Linear layers are called, or
        # (MLP, head) checked with _plain where they are not.
        all(_plain(m) for m in model.modules() if not isinstance(m, torch.nn.Linear)),
    )
    return all(checks)


@dataclass
class _Layer:
    """The weights of one decoder layer: views of the model's parameters, no copies, except
    the weights of :class:`_Fixed` projections."""

    norm1: torch.Tensor
    q: torch.nn.Module | _Fixed
    k: torch.nn.Module | _Fixed
    v: torch.nn.Module | _Fixed
    o: torch.nn.Module | _Fixed
    norm2: torch.Tensor
    gate: torch.nn.Module | _Fixed
    up: torch.nn.Module | _Fixed
    down: torch.nn.Module | _Fixed
    q_norm: torch.Tensor | None = None
    """Qwen3: RMSNorm weight over each query head (None: no such norm)."""
    k_norm: torch.Tensor | None = None
    """Qwen3: RMSNorm weight over each key head."""


class FastDecoder:
    """Prefill and one-token decoding steps with a KV cache, for a model :func:`supports`.

    ``prefill(ids [N, P], mask [N, P])`` and ``decode(tokens [N])`` return the logits
    [N, V] of the last position; ``keep(rows)`` drops the other rows from the cache.
    Prompts are left-padded; positions count real tokens, as Hugging Face's generate does.

    The cache is allocated once per prefill with ``room`` further positions and written
    in place (it grows by doubling if decoding goes beyond), so a decoding step copies
    nothing but its own keys and values.
    """

    def __init__(self, model, room: int = 0) -> None:
        cfg, inner = model.config, model.model
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.eps = cfg.rms_norm_eps
        self.embed = inner.embed_tokens.weight
        self.final_norm = inner.norm.weight
        dtype = product_dtype(self.embed.device)
        self.cast = dtype if dtype != torch.float32 else None  # autocast's, when it is on
        self.head = _projection(model.lm_head, self.cast)
        self.inv_freq = inner.rotary_emb.inv_freq
        attention, mlp = ("q", "k", "v", "o"), ("gate", "up", "down")
        self.layers = [
            _Layer(
                layer.input_layernorm.weight,
                *(_projection(getattr(layer.self_attn, f"{p}_proj"), self.cast) for p in attention),
                layer.post_attention_layernorm.weight,
                *(_projection(getattr(layer.mlp, f"{p}_proj"), self.cast) for p in mlp),
                *(_norm_weight(layer.self_attn, f"{p}_norm") for p in "qk"),
            )
            for layer in inner.layers
        ]
        self.room = room
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] = []  # [N, kv_heads, C, D] each
        self.length = 0  # positions of the cache in use
        self.key_mask = torch.zeros(0, 0, dtype=torch.bool)  # [N, C] real keys in the cache
        self.position = torch.zeros(0, 1, dtype=torch.long)  # [N, 1] position of the next token

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        if dtype == torch.float32:  # one fused kernel, the same arithmetic
            return F.rms_norm(x, weight.shape, weight, self.eps)
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x.to(dtype)

    def _input(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """The normed input of a block's projections, under autocast cast once to its dtype
        (autocast would cast it again for each projection: q, k and v; gate and up)."""
        h = self._norm(x, weight)
        return h if self.cast is None else h.to(self.cast)

    def _rotary(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` [N, 1, S, D] for ``positions`` [N, S]."""
        freqs = positions[..., None].float() * self.inv_freq.to(positions.device).float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _attention(
        self, layer: _Layer, h: torch.Tensor, i: int, rot, mask: torch.Tensor
    ) -> torch.Tensor:
        n, s, _ = h.shape
        q = layer.q(h).view(n, s, self.heads, self.head_dim)
        k = layer.k(h).view(n, s, self.kv_heads, self.head_dim)
        v = layer.v(h).view(n, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if layer.q_norm is not None:
            q, k = self._norm(q, layer.q_norm), self._norm(k, layer.k_norm)
        q = self._rotate(q.transpose(1, 2), *rot)
        k = self._rotate(k.transpose(1, 2), *rot)
        if self.cast is not None:  # as autocast casts them for attention: the cache too
            q, k, v = q.to(self.cast), k.to(self.cast), v.to(self.cast)
        if i == len(self.cache):  # prefill: this layer's buffers, in the dtype k comes in
            shape = (n, self.kv_heads, self.key_mask.shape[1], self.head_dim)
            self.cache.append((k.new_empty(shape), v.new_empty(shape)))
        keys, values = self.cache[i]
        end = self.length + s
        keys[:, :, self.length : end] = k
        values[:, :, self.length : end] = v
        k, v = keys[:, :, :end], values[:, :, :end]
        if self.kv_heads != self.heads and not _GQA_IN_SDPA:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        gqa = {"enable_gqa": True} if self.kv_heads != self.heads and _GQA_IN_SDPA else {}
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **gqa)
        return layer.o(out.transpose(1, 2).reshape(n, s, -1))

    def _forward(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Logits [N, V] of the last of the ``S`` new positions; ``mask`` [N, 1, S, L] bool."""
        x = F.embedding(ids, self.embed)  # [N, S, H]
        rot = self._rotary(positions, x.dtype)
        for i, layer in enumerate(self.layers):
            x = x + self._attention(layer, self._input(x, layer.norm1), i, rot, mask)
            x = x + self._mlp(layer, self._input(x, layer.norm2))
        self.length += ids.shape[1]
        last = self._norm(x[:, -1], self.final_norm)  # [N, H]
        if last.shape[0] > FEW_ROWS or not _weights_only(self.head) or self.head.bias is not None:
            return self.head(last)
        return torch.mm(self.head.weight, last.T).T.contiguous()

    @staticmethod
    def _mlp(layer: _Layer, h: torch.Tensor) -> torch.Tensor:
        """``down(silu(gate(h)) * up(h))``; for few rows computed transposed, ``[I, rows]``."""
        rows = h.reshape(-1, h.shape[-1])  # [R, H]
        if rows.shape[0] > FEW_ROWS or not _weights_only(layer.gate, layer.up, layer.down):
            return layer.down(F.silu(layer.gate(h)) * layer.up(h))
        gate = torch.mm(layer.gate.weight, rows.T)  # [I, R]
        up = torch.mm(layer.up.weight, rows.T)
        out = torch.mm(layer.down.weight, F.silu(gate).mul_(up))  # [H, R]
        return out.T.reshape(h.shape)

    def _grow(self) -> None:
        """Double the cache's capacity (decoding past the room asked for)."""
        capacity = 2 * self.key_mask.shape[1]
        grown = []
        for k_old, v_old in self.cache:
            k = k_old.new_empty(*k_old.shape[:2], capacity, k_old.shape[3])
            v = torch.empty_like(k)
            k[:, :, : self.length] = k_old[:, :, : self.length]
            v[:, :, : self.length] = v_old[:, :, : self.length]
            grown.append((k, v))
        self.cache = grown
        mask = self.key_mask.new_zeros(self.key_mask.shape[0], capacity)
        mask[:, : self.length] = self.key_mask[:, : self.length]
        self.key_mask = mask

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Run the prompts ``ids`` [N, P] (left-padded, ``mask`` [N, P]); logits [N, V]."""
        real = mask.bool()
        positions = (mask.long().cumsum(-1) - 1).clamp_min(0)
        n, p = ids.shape
        causal = torch.ones(p, p, dtype=torch.bool, device=ids.device).tril()
        # A padding query attends to itself only, so no row of the mask is empty.
        allowed = (causal[None] & real[:, None, :]) | torch.eye(
            p, dtype=torch.bool, device=ids.device
        )[None]
        capacity = p + max(self.room, 1)
        self.cache = []  # allocated by the first forward, layer by layer
        self.key_mask = torch.zeros(n, capacity, dtype=torch.bool, device=ids.device)
        self.key_mask[:, :p] = real
        self.length, self.position = 0, positions[:, -1:] + 1
        return self._forward(ids, positions, allowed[:, None])

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Append one token per row (``tokens`` [N]); logits [N, V]."""
        if self.length == self.key_mask.shape[1]:
            self._grow()
        self.key_mask[:, self.length] = True
        mask = self.key_mask[:, None, None, : self.length + 1]
        logits = self._forward(tokens[:, None], self.position, mask)
        self.position = self.position + 1
        return logits

    def keep(self, rows: torch.Tensor) -> None:
        """Keep ``rows`` of the batch (and of the cache), in that order; a repeated index copies its row."""
        self.cache = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.cache]
        self.key_mask, self.position = self.key_mask[rows], self.position[rows]
