"""Floors: the least time a phase of an RL step can take on this machine.

A floor is the arithmetic the phase needs (matrix-product FLOPs of the model, counted
from its configuration) over the fp32 matrix-product rate measured in the same run,
and for decoding also the weights it must read once per decoding step over the
measured memory bandwidth. Work that is not needed is not counted: each distinct
prompt is computed once, no padding, no recomputation. The same floors apply to both
trainers (they run the same job), so ``floor / measured`` says how close each one gets.

Counting (``S`` = number of parameters of one layer's projections, ``H`` hidden size,
``V`` vocabulary, ``A`` = ``4 x layers x heads x head_dim`` FLOPs per query-key pair):

- a forward position costs ``2 S x layers``; a position that predicts a token adds the
  head, ``2 H V``; each attended key adds ``A``;
- generation: the distinct prompts once (prefill), then one position per generated
  token but the first of each completion (its logits come from the prefill); each
  decoding step reads every weight once, so it takes at least ``weight bytes /
  bandwidth``, and the whole phase at least the larger of the two sums;
- update: the prompts once and every response token, forward and backward
  (``3 x`` the forward), plus AdamW and clipping reading and writing parameters,
  gradients and both moments (32 bytes per fp32 parameter) at the memory bandwidth.

Attention keys are counted from the step's totals (a lower bound: the floor stays a
floor when completion lengths are uneven).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

OPTIMIZER_BYTES_PER_PARAM = 32
"""AdamW (read parameter, gradient, two moments; write parameter, two moments) plus the
clipping norm's read of the gradient: 8 fp32 passes."""


@dataclass(frozen=True)
class ModelShape:
    """What the FLOP counts need from a causal LM's configuration."""

    layers: int
    """Decoder layers."""
    hidden: int
    """Hidden size H."""
    intermediate: int
    """MLP width."""
    heads: int
    """Query heads."""
    kv_heads: int
    """Key/value heads."""
    head_dim: int
    """Per-head width."""
    vocab: int
    """Vocabulary V."""
    params: int
    """Parameters (a tied embedding counted once)."""
    bytes_per_param: int = 4
    """Parameter size (fp32)."""

    @classmethod
    def from_config(cls, config, params: int) -> ModelShape:
        """From a Hugging Face Llama-family config and the model's parameter count."""
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            intermediate=config.intermediate_size,
            heads=config.num_attention_heads,
            kv_heads=config.num_key_value_heads,
            head_dim=head_dim,
            vocab=config.vocab_size,
            params=params,
        )

    @property
    def position_flops(self) -> int:
        """Forward FLOPs of the layers' projections per position."""
        h, d = self.hidden, self.head_dim
        attention = h * d * (self.heads + 2 * self.kv_heads) + self.heads * d * h
        mlp = 3 * h * self.intermediate
        return 2 * self.layers * (attention + mlp)

    @property
    def head_flops(self) -> int:
        """Forward FLOPs of the LM head per predicted token."""
        return 2 * self.hidden * self.vocab

    @property
    def pair_flops(self) -> int:
        """Forward FLOPs of attention per query-key pair (scores and weighted values)."""
        return 4 * self.layers * self.heads * self.head_dim

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weights: what one decoding step reads at least."""
        return self.params * self.bytes_per_param


@dataclass(frozen=True)
class StepWork:
    """The tokens one RL step processes (the same job for both trainers)."""

    prompt_lengths: tuple[int, ...]
    """Tokens of each distinct prompt (one per group)."""
    completions: int
    """Completions sampled."""
    generated: int
    """Completion tokens (EOS included)."""
    longest: int
    """The longest completion: the decoding steps generation runs."""

    def prompt_pairs(self) -> int:
        """Query-key pairs of causal attention within the prompts."""
        return sum(p * (p + 1) // 2 for p in self.prompt_lengths)

    def response_pairs(self) -> int:
        """Query-key pairs of the response tokens (a lower bound from the totals)."""
        n, tokens = max(self.completions, 1), self.generated
        shortest_prompt = min(self.prompt_lengths, default=0)
        return tokens * shortest_prompt + (tokens * tokens // n + tokens) // 2


@dataclass(frozen=True)
class Rates:
    """The machine's measured rates at one thread count."""

    gemm_flops: float
    """fp32 matrix products, FLOP/s, on the model's own shapes."""
    read_bytes: float
    """Memory read bandwidth, bytes/s."""


def generation_flops(shape: ModelShape, work: StepWork) -> tuple[float, float]:
    """``(prefill, decode)`` FLOPs of generation."""
    prompts = sum(work.prompt_lengths)
    prefill = prompts * shape.position_flops + len(work.prompt_lengths) * shape.head_flops
    prefill += work.prompt_pairs() * shape.pair_flops
    decoded = max(work.generated - work.completions, 0)
    decode = decoded * (shape.position_flops + shape.head_flops)
    decode += work.response_pairs() * shape.pair_flops
    return float(prefill), float(decode)


def generation_floor(shape: ModelShape, work: StepWork, rates: Rates) -> float:
    """Seconds generation needs at least: prefill, then the larger of decode FLOPs and weight reads."""
    prefill, decode = generation_flops(shape, work)
    reads = max(work.longest - 1, 0) * shape.weight_bytes / rates.read_bytes
    return prefill / rates.gemm_flops + max(decode / rates.gemm_flops, reads)


def update_flops(shape: ModelShape, work: StepWork) -> float:
    """FLOPs of one forward and backward over the step's tokens, each prompt once."""
    positions = sum(work.prompt_lengths) + work.generated
    forward = positions * shape.position_flops + work.generated * shape.head_flops
    forward += (work.prompt_pairs() + work.response_pairs()) * shape.pair_flops
    return 3.0 * forward


def update_floor(shape: ModelShape, work: StepWork, rates: Rates) -> float:
    """Seconds the update needs at least: its FLOPs, plus the optimiser's memory traffic."""
    optimizer = shape.params * OPTIMIZER_BYTES_PER_PARAM / rates.read_bytes
    return update_flops(shape, work) / rates.gemm_flops + optimizer


# ---------------------------------------------------------------- measuring the rates


def _best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-touch page faults, thread pool start
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_rates(shape: ModelShape, threads: int, *, rows: int = 512, repeats: int = 5) -> Rates:
    """fp32 GEMM rate on the layer's projection shapes (``rows`` positions) and read bandwidth.

    The GEMMs are the forward products of one layer, ``[rows, H] x [H, out]`` for every
    projection, timed together (best of ``repeats``); the bandwidth is the best time to
    sum a 512 MiB tensor.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        h, d = shape.hidden, shape.head_dim
        outs = [
            shape.heads * d,
            shape.kv_heads * d,
            shape.kv_heads * d,
            shape.intermediate,
            shape.intermediate,
        ]
        x, y = torch.randn(rows, h), torch.randn(rows, shape.intermediate)
        weights = [torch.randn(h, o) for o in outs]
        down, o_proj = torch.randn(shape.intermediate, h), torch.randn(shape.heads * d, h)
        z = torch.randn(rows, shape.heads * d)

        def layer():
            for w in weights:
                torch.mm(x, w)
            torch.mm(y, down)
            torch.mm(z, o_proj)

        flops = 2 * rows * (h * sum(outs) + shape.intermediate * h + shape.heads * d * h)
        gemm = flops / _best_seconds(layer, repeats)
        big = torch.ones(2**27)  # 512 MiB of float32
        read = big.numel() * 4 / _best_seconds(big.sum, repeats)
    finally:
        torch.set_num_threads(previous)
    return Rates(gemm_flops=gemm, read_bytes=read)
