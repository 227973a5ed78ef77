"""Per-token log-probabilities and entropy without materialising ``[N, V]`` float32 logits.

For a causal LM the trainer needs, at every response token, ``log p(label)`` and the
entropy of the next-token distribution, both differentiable (the policy loss and the
entropy bonus). The plain way, ``log_softmax(hidden @ W.T)`` over the whole batch, holds
several ``[N, V]`` float32 tensors at once (logits, log-probs, probabilities, and the
copies autograd saves for backward): at ``N = 8 * 1024`` and ``V = 49152`` each one is
1.6 GB. Here rows are processed ``chunk_size`` at a time by custom autograd functions
that save only their inputs and ``[N]`` per-row statistics, and recompute each chunk's
logits in backward, so neither pass holds more than one chunk's ``[chunk, V]`` logits
(plus a few same-sized temporaries).

Maths, with ``z = logits / temperature``, ``p = softmax(z)``, ``lse = logsumexp(z)``:

- ``logp = z[y] - lse``; ``d logp / dz = onehot(y) - p``.
- ``H = lse - sum(p * z)``; ``dH / dz = -p * (log p + H)``.

All arithmetic is float32, or float64 for float64 inputs (bf16/fp16 inputs are upcast one
chunk at a time; autocast is switched off inside); the outputs have that dtype and the
gradients come back in the inputs' dtypes. Logits must be finite.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

DEFAULT_CHUNK_SIZE = 1024
"""Rows per chunk: 1024 x 49152 float32 logits is 201 MB."""


class TokenStats(NamedTuple):
    """Per-token statistics; ``[...]`` is ``[N]`` at tensor level, ``[B, T]`` at model level."""

    logp: torch.Tensor
    """[...] float32 log-probability of each label under ``softmax(logits / temperature)``."""
    entropy: torch.Tensor | None
    """[...] float32 entropy of that distribution, or None when not asked for."""


def _compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def _chunk_forward(
    z: torch.Tensor, labels: torch.Tensor, want_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``z [c, V]`` float32 scaled logits -> ``(logp [c], lse [c], entropy [c] | None)``."""
    lse = torch.logsumexp(z, dim=-1)  # [c]
    logp = z.gather(1, labels[:, None]).squeeze(1) - lse
    if not want_entropy:
        return logp, lse, None
    p = (z - lse[:, None]).exp_()  # [c, V]
    entropy = lse - torch.einsum("cv,cv->c", p, z)
    return logp, lse, entropy


def _chunk_grad(
    z: torch.Tensor,
    labels: torch.Tensor,
    lse: torch.Tensor,
    entropy: torch.Tensor | None,
    g_logp: torch.Tensor | None,
    g_entropy: torch.Tensor | None,
) -> torch.Tensor:
    """Gradient w.r.t. the scaled logits ``z [c, V]``, written over ``z`` in place.

    ``grad = g_logp * (onehot - p) - g_entropy * p * (z - lse + H)``.
    """
    p = (z - lse[:, None]).exp_()  # [c, V]
    if g_entropy is not None and entropy is not None:
        z.sub_((lse - entropy)[:, None]).mul_(-g_entropy[:, None])  # -g_H * (log p + H)
    else:
        z.zero_()
    if g_logp is not None:
        z.sub_(g_logp[:, None])
    z.mul_(p)
    if g_logp is not None:
        z.scatter_add_(1, labels[:, None], g_logp[:, None])
    return z


def _chunks(n: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in steps of ``chunk_size``."""
    return [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]


def _slice(t: torch.Tensor | None, s: int, e: int) -> torch.Tensor | None:
    return None if t is None else t[s:e]


class _LinearTokenStats(torch.autograd.Function):
    """Chunked ``(logp, entropy)`` of ``softmax((hidden @ weight.T + bias) / temperature)``."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, temperature, chunk_size, want_entropy):
        n, dt = hidden.shape[0], _compute_dtype(hidden, weight)
        logp = hidden.new_empty(n, dtype=dt)
        lse = torch.empty_like(logp)
        entropy = torch.empty_like(logp) if want_entropy else None
        with torch.autocast(hidden.device.type, enabled=False):
            w32 = weight.to(dt)
            b32 = None if bias is None else bias.to(dt)
            for s, e in _chunks(n, chunk_size):
                z = _linear_logits(hidden[s:e], w32, b32, temperature)
                logp[s:e], lse[s:e], ent = _chunk_forward(z, labels[s:e], want_entropy)
                if entropy is not None:
                    entropy[s:e] = ent
        ctx.save_for_backward(hidden, weight, bias, labels, lse, entropy)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.set_materialize_grads(False)
        return logp, entropy

    @staticmethod
    def backward(ctx, g_logp, g_entropy):
        hidden, weight, bias, labels, lse, entropy = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        if g_logp is None and g_entropy is None:
            return None, None, None, None, None, None, None
        with torch.autocast(hidden.device.type, enabled=False):
            w32 = weight.to(_compute_dtype(hidden, weight))
            b32 = None if bias is None else bias.to(w32.dtype)
            grad_h = torch.empty_like(hidden) if need_h else None
            grad_w = torch.zeros_like(w32) if need_w else None
            grad_b = torch.zeros_like(b32) if need_b else None
            for s, e in _chunks(hidden.shape[0], ctx.chunk_size):
                h32 = hidden[s:e].to(w32.dtype)
                z = _linear_logits(h32, w32, b32, ctx.temperature)
                gz = _chunk_grad(
                    z,
                    labels[s:e],
                    lse[s:e],
                    _slice(entropy, s, e),
                    _slice(g_logp, s, e),
                    _slice(g_entropy, s, e),
                )
                if ctx.temperature != 1.0:
                    gz.div_(ctx.temperature)  # [c, V] grad w.r.t. the unscaled logits
                if grad_h is not None:
                    grad_h[s:e] = gz @ w32
                if grad_w is not None:
                    grad_w.addmm_(gz.T, h32)
                if grad_b is not None:
                    grad_b += gz.sum(0)
        grad_w = None if grad_w is None else grad_w.to(weight.dtype)
        grad_b = None if grad_b is None else grad_b.to(bias.dtype)
        return grad_h, grad_w, grad_b, None, None, None, None


def _linear_logits(
    hidden: torch.Tensor, w32: torch.Tensor, b32: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """``[c, H] -> [c, V]`` ``(hidden @ w32.T + b32) / temperature`` in ``w32.dtype``."""
    h32 = hidden.to(w32.dtype)
    z = h32 @ w32.T if b32 is None else torch.addmm(b32, h32, w32.T)
    return z.div_(temperature) if temperature != 1.0 else z


class _LogitsTokenStats(torch.autograd.Function):
    """Chunked ``(logp, entropy)`` of ``softmax(logits / temperature)`` for given logits."""

    @staticmethod
    def forward(ctx, logits, labels, temperature, chunk_size, want_entropy):
        n = logits.shape[0]
        logp = logits.new_empty(n, dtype=_compute_dtype(logits))
        lse = torch.empty_like(logp)
        entropy = torch.empty_like(logp) if want_entropy else None
        for s, e in _chunks(n, chunk_size):
            z = _scaled(logits[s:e], temperature)
            logp[s:e], lse[s:e], ent = _chunk_forward(z, labels[s:e], want_entropy)
            if entropy is not None:
                entropy[s:e] = ent
        ctx.save_for_backward(logits, labels, lse, entropy)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.set_materialize_grads(False)
        return logp, entropy

    @staticmethod
    def backward(ctx, g_logp, g_entropy):
        logits, labels, lse, entropy = ctx.saved_tensors
        if (g_logp is None and g_entropy is None) or not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        grad = torch.empty_like(logits)
        for s, e in _chunks(logits.shape[0], ctx.chunk_size):
            z = _scaled(logits[s:e], ctx.temperature)
            gz = _chunk_grad(
                z,
                labels[s:e],
                lse[s:e],
                _slice(entropy, s, e),
                _slice(g_logp, s, e),
                _slice(g_entropy, s, e),
            )
            grad[s:e] = gz.div_(ctx.temperature) if ctx.temperature != 1.0 else gz
        return grad, None, None, None, None


def _scaled(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """A fresh float32/64 copy of ``logits / temperature`` (safe to modify in place)."""
    z = logits.to(_compute_dtype(logits), copy=True)
    return z.div_(temperature) if temperature != 1.0 else z


def _check_common(
    labels: torch.Tensor, n: int, vocab: int, temperature: float, chunk_size: int
) -> None:
    """Raise ValueError for bad labels, temperature or chunk size."""
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape [{n}], got {list(labels.shape)}")
    if labels.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"labels must be int64 or int32, got {labels.dtype}")
    if n and (int(labels.min()) < 0 or int(labels.max()) >= vocab):
        raise ValueError(
            f"labels must lie in [0, {vocab}), got range [{int(labels.min())}, {int(labels.max())}]"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def token_logprobs_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    compute_entropy: bool = True,
) -> TokenStats:
    """Log-prob of ``labels`` and entropy under ``softmax((hidden @ weight.T + bias) / temperature)``.

    Args:
        hidden: [N, H] final hidden states (any float dtype).
        weight: [V, H] output-embedding (``lm_head``) weight.
        labels: [N] int64 token ids in ``[0, V)``.
        bias: [V] optional output bias.
        temperature: logits are divided by it (use the sampling temperature).
        chunk_size: rows per chunk; peak extra memory is a few ``[chunk_size, V]`` float32.
        compute_entropy: when False, ``entropy`` is None and its work is skipped.

    Returns:
        ``TokenStats(logp [N] float32, entropy [N] float32 | None)``, differentiable
        w.r.t. ``hidden``, ``weight`` and ``bias``.
    """
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(
            f"hidden must be [N, H] and weight [V, H], got {list(hidden.shape)} and {list(weight.shape)}"
        )
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"bias must have shape [{weight.shape[0]}], got {list(bias.shape)}")
    _check_common(labels, hidden.shape[0], weight.shape[0], temperature, chunk_size)
    logp, entropy = _LinearTokenStats.apply(
        hidden, weight, bias, labels.long(), float(temperature), int(chunk_size), compute_entropy
    )
    return TokenStats(logp, entropy)


def logprobs_entropy_from_logits(
    logits: torch.Tensor,
    labels: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = True,
) -> TokenStats:
    """Log-prob of ``labels`` and entropy under ``softmax(logits / temperature)``, in chunks.

    For models whose logits cannot be rebuilt from hidden states (soft-capping, scaling).
    Only one chunk is upcast to float32 at a time; backward writes the ``logits``-shaped
    gradient chunk by chunk in ``logits.dtype``.

    Args:
        logits: [..., V] finite logits (any float dtype).
        labels: [...] token ids in ``[0, V)``.
        chunk_size: rows (flattened leading positions) per chunk.
        temperature: logits are divided by it.
        compute_entropy: when False, ``entropy`` is None.

    Returns:
        ``TokenStats(logp [...] float32, entropy [...] float32 | None)``.
    """
    if logits.dim() < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels must have shape {list(logits.shape[:-1])}, got {list(labels.shape)}"
        )
    lead, vocab = labels.shape, logits.shape[-1]
    flat_logits, flat_labels = logits.reshape(-1, vocab), labels.reshape(-1)
    _check_common(flat_labels, flat_labels.shape[0], vocab, temperature, chunk_size)
    logp, entropy = _LogitsTokenStats.apply(
        flat_logits, flat_labels.long(), float(temperature), int(chunk_size), compute_entropy
    )
    return TokenStats(logp.reshape(lead), None if entropy is None else entropy.reshape(lead))
