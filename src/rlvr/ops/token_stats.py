"""Per-token log-probabilities and entropy without materialising ``[N, V]`` float32 logits.

For a causal LM the trainer needs, at every response token, ``log p(label)`` and the
entropy of the next-token distribution, both differentiable (the policy loss and the
entropy bonus). The plain way, ``log_softmax(hidden @ W.T)`` over the whole batch, holds
several ``[N, V]`` float32 tensors at once (logits, log-probs, probabilities, and the
copies autograd saves for backward): at ``N = 8 * 1024`` and ``V = 49152`` each one is
1.6 GB. Here rows are processed ``chunk_size`` at a time by custom autograd functions
that save only their inputs and ``[N]`` per-row statistics, and recompute each chunk's
logits in backward, so neither pass holds more than one chunk's ``[chunk, V]`` logits:
two ``[chunk, V]`` buffers are allocated per pass and reused for every chunk. When all
rows fit in one chunk, the forward's logits buffer is kept for the backward instead of
recomputing it (the backward allocates only the other one): a third fewer FLOPs in the
head at the same peak. Other
memory: the ``[N]`` statistics, the input-sized gradients, and, for bf16/fp16 weights, a
float32 copy of the ``[V, H]`` weight and a float32 ``[V, H]`` gradient accumulator.

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
"""Rows per chunk: one 1024 x 49152 float32 buffer is 192 MiB, and a pass uses two."""


class TokenStats(NamedTuple):
    """Per-token statistics; ``[...]`` is ``[N]`` at tensor level, ``[B, T]`` at model level."""

    logp: torch.Tensor
    """[...] float32 log-probability of each label under ``softmax(logits / temperature)``."""
    entropy: torch.Tensor | None
    """[...] float32 entropy of that distribution, or None when not asked for."""


def _compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32."""
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


class _Workspace:
    """Two reusable ``[chunk, V]`` buffers, so chunks after the first allocate nothing big.

    Fresh multi-megabyte allocations are costly on CPU (every page faults on first
    touch); reusing the buffers also caps the peak at two ``[chunk, V]`` tensors.
    """

    def __init__(
        self,
        rows: int,
        vocab: int,
        like: torch.Tensor,
        dtype: torch.dtype,
        logits: torch.Tensor | None = None,
    ) -> None:
        # z, then the gradient (``logits``: a buffer that already holds z)
        self.logits = like.new_empty(rows, vocab, dtype=dtype) if logits is None else logits
        self.probs = torch.empty_like(self.logits)  # exp(z - max), then p

    def views(self, c: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``c`` rows of both buffers (contiguous)."""
        return self.logits[:c], self.probs[:c]


def _chunk_forward(
    z: torch.Tensor, labels: torch.Tensor, want_entropy: bool, work: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``z [c, V]`` scaled logits -> ``(logp [c], lse [c], entropy [c] | None)``; ``work [c, V]`` scratch."""
    zmax = z.amax(dim=-1, keepdim=True)  # [c, 1]
    e = torch.sub(z, zmax, out=work).exp_()  # [c, V] exp(z - max)
    total = e.sum(dim=-1, keepdim=True)  # [c, 1]
    lse = (zmax + total.log()).squeeze(1)  # [c]
    logp = z.gather(1, labels[:, None]).squeeze(1) - lse
    if not want_entropy:
        return logp, lse, None
    p = e.div_(total)  # [c, V]
    entropy = lse - torch.einsum("cv,cv->c", p, z)
    return logp, lse, entropy


def _chunk_grad(
    z: torch.Tensor,
    labels: torch.Tensor,
    lse: torch.Tensor,
    entropy: torch.Tensor | None,
    grads: tuple[torch.Tensor | None, torch.Tensor | None],
    work: torch.Tensor,
) -> torch.Tensor:
    """Gradient w.r.t. the scaled logits ``z [c, V]``, written over ``z`` in place.

    ``grads = (g_logp [c] | None, g_entropy [c] | None)``; ``work [c, V]`` is scratch.
    ``grad = g_logp * (onehot - p) - g_entropy * p * (z - lse + H)``.
    """
    g_logp, g_entropy = grads
    p = torch.sub(z, lse[:, None], out=work).exp_()  # [c, V]
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


def _grads_slice(
    g_logp: torch.Tensor | None, g_entropy: torch.Tensor | None, s: int, e: int
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Rows ``s:e`` of the incoming gradients (either may be None)."""
    return (None if g_logp is None else g_logp[s:e], None if g_entropy is None else g_entropy[s:e])


def _linear_logits(
    hidden: torch.Tensor,
    w32: torch.Tensor,
    b32: torch.Tensor | None,
    temperature: float,
    out: torch.Tensor,
) -> torch.Tensor:
    """``[c, H] -> out [c, V] = (hidden @ w32.T + b32) / temperature`` in ``w32.dtype``."""
    h32 = hidden.to(w32.dtype)
    z = torch.mm(h32, w32.T, out=out) if b32 is None else torch.addmm(b32, h32, w32.T, out=out)
    return z.div_(temperature) if temperature != 1.0 else z


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
            ws = _Workspace(min(n, chunk_size), weight.shape[0], hidden, dt)
            for s, e in _chunks(n, chunk_size):
                zbuf, work = ws.views(e - s)
                z = _linear_logits(hidden[s:e], w32, b32, temperature, zbuf)
                logp[s:e], lse[s:e], ent = _chunk_forward(z, labels[s:e], want_entropy, work)
                if entropy is not None:
                    entropy[s:e] = ent
        # One chunk: keep its logits for backward instead of recomputing them (the
        # backward would allocate that buffer anyway; the scratch one is freed now).
        keep = n <= chunk_size and any(ctx.needs_input_grad[:3])
        ctx.logits = ws.logits[:n] if keep else None
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
        n, t = hidden.shape[0], ctx.temperature
        kept, ctx.logits = ctx.logits, None  # overwritten by the gradient below: use once
        with torch.autocast(hidden.device.type, enabled=False):
            w32 = weight.to(lse.dtype)
            b32 = None if bias is None else bias.to(lse.dtype)
            grad_h = torch.empty_like(hidden) if need_h else None
            grad_w = grad_b = None  # written by the first chunk, accumulated by the others
            ws = _Workspace(min(n, ctx.chunk_size), weight.shape[0], hidden, lse.dtype, kept)
            for s, e in _chunks(n, ctx.chunk_size):
                zbuf, work = ws.views(e - s)
                h32 = hidden[s:e].to(w32.dtype)
                z = zbuf if kept is not None else _linear_logits(h32, w32, b32, t, zbuf)
                gz = _chunk_grad(
                    z,
                    labels[s:e],
                    lse[s:e],
                    None if entropy is None else entropy[s:e],
                    _grads_slice(g_logp, g_entropy, s, e),
                    work,
                )
                if t != 1.0:
                    gz.div_(t)  # [c, V] gradient w.r.t. the unscaled logits
                if grad_h is not None:
                    grad_h[s:e] = gz @ w32
                if need_w:
                    grad_w = gz.T @ h32 if grad_w is None else grad_w.addmm_(gz.T, h32)
                if need_b:
                    grad_b = gz.sum(0) if grad_b is None else grad_b.add_(gz.sum(0))
        if need_w:
            grad_w = grad_w.to(weight.dtype) if grad_w is not None else torch.zeros_like(weight)
        if need_b:
            grad_b = grad_b.to(bias.dtype) if grad_b is not None else torch.zeros_like(bias)
        return grad_h, grad_w, grad_b, None, None, None, None


class _LogitsTokenStats(torch.autograd.Function):
    """Chunked ``(logp, entropy)`` of ``softmax(logits / temperature)`` for given logits."""

    @staticmethod
    def forward(ctx, logits, labels, temperature, chunk_size, want_entropy):
        n, dt = logits.shape[0], _compute_dtype(logits)
        logp = logits.new_empty(n, dtype=dt)
        lse = torch.empty_like(logp)
        entropy = torch.empty_like(logp) if want_entropy else None
        ws = _Workspace(min(n, chunk_size), logits.shape[1], logits, dt)
        for s, e in _chunks(n, chunk_size):
            zbuf, work = ws.views(e - s)
            z = _scaled(logits[s:e], temperature, zbuf)
            logp[s:e], lse[s:e], ent = _chunk_forward(z, labels[s:e], want_entropy, work)
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
        n, t = logits.shape[0], ctx.temperature
        grad = torch.empty_like(logits)
        ws = _Workspace(min(n, ctx.chunk_size), logits.shape[1], logits, lse.dtype)
        for s, e in _chunks(n, ctx.chunk_size):
            zbuf, work = ws.views(e - s)
            z = _scaled(logits[s:e], t, zbuf)
            gz = _chunk_grad(
                z,
                labels[s:e],
                lse[s:e],
                None if entropy is None else entropy[s:e],
                _grads_slice(g_logp, g_entropy, s, e),
                work,
            )
            grad[s:e] = gz.div_(t) if t != 1.0 else gz
        return grad, None, None, None, None


def _scaled(logits: torch.Tensor, temperature: float, out: torch.Tensor) -> torch.Tensor:
    """``out = logits / temperature`` in ``out.dtype`` (a copy, safe to modify in place)."""
    z = out.copy_(logits)
    return z.div_(temperature) if temperature != 1.0 else z


def _check_common(
    labels: torch.Tensor, n: int, vocab: int, temperature: float, chunk_size: int
) -> None:
    """Raise ValueError for bad labels, temperature or chunk size."""
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape [{n}], got {list(labels.shape)}")
    if labels.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"labels must be int64 or int32, got {labels.dtype}")
    if n:
        low, high = torch.stack(torch.aminmax(labels)).tolist()  # one host read
        if low < 0 or high >= vocab:
            raise ValueError(f"labels must lie in [0, {vocab}), got range [{low}, {high}]")
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
