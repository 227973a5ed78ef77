"""The ``lean`` sampler: a plain KV-cached decoding loop over the policy model.

It applies temperature, top-k and top-p exactly as Hugging Face's logits warpers do (same
order, same RNG draws), prefills each distinct prompt once for its ``n`` samples (the KV
cache is copied to them), drops rows from the batch once they emit EOS, and for
Llama-family models computes each step with :mod:`rlvr.generation.fast_decode` instead of
the Hugging Face forward. Tests check that, without the row dropping, it draws the same
tokens as the ``hf`` sampler, and that with it every row still samples from its own
distribution (greedy output is identical).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from rlvr.generation.base import SamplingConfig, position_ids_from_mask
from rlvr.generation.policy import PolicySampler
from rlvr.generation.registry import register_sampler
from rlvr.generation.warp import next_tokens, warp_logits


@dataclass(frozen=True)
class LeanOptions:
    """Switches of the lean sampler (each keeps the sampled distribution, to float rounding:
    a different batch shape rounds logits differently, so a near-tie can draw another token)."""

    fast: bool = True
    """Use the lean Llama-family forward where it reproduces the model exactly."""
    prune: bool = True
    """Drop finished rows from the batch (after the first row stops, the RNG stream is
    split over fewer rows than ``hf`` would use, so draws differ from then on)."""
    share_prefill: bool = True
    """Prefill each distinct prompt once and copy its KV cache to its ``n`` rows."""
    draw: str = "cdf"
    """How a token is drawn from the warped distribution: ``cdf`` (one uniform number per
    row against the float64 cumulative sum; the same distribution) or ``multinomial``
    (``torch.multinomial``, one exponential number per vocabulary entry, as Hugging
    Face's ``generate`` draws: the same tokens as ``hf`` under the same seed)."""

    def __post_init__(self) -> None:
        if self.draw not in DRAWS:
            raise ValueError(f"draw must be one of {list(DRAWS)}, got {self.draw!r}")


DRAWS = ("cdf", "multinomial")


@register_sampler("lean", options=LeanOptions, logprobs=False)
class LeanSampler(PolicySampler):
    """KV-cached sampling loop; see the module docstring."""

    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        opts = self.options
        return sample_lean(
            self.model,
            prompt_ids,
            prompt_mask,
            sampling,
            eos,
            padding,
            group=group if opts.share_prefill else 1,
            prune=opts.prune,
            fast=opts.fast,
            draw=opts.draw,
        )


class HFStepper:
    """Prefill / decode / keep over the model's own forward and ``DynamicCache`` (any causal LM)."""

    def __init__(self, model) -> None:
        self.model = model
        self.keep_last = {"logits_to_keep": 1} if accepts_logits_to_keep(model) else {}
        self.cache_key = cache_keyword(model)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self.cache, self.attn = new_cache(self.model), mask
        positions = position_ids_from_mask(mask)
        self.position = positions[:, -1:] + 1  # [N, 1]; the last prompt column is real in every row
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            **{self.cache_key: self.cache},
            use_cache=True,
            **self.keep_last,
        )
        return out.logits[:, -1].float()

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        self.attn = torch.cat([self.attn, torch.ones_like(self.attn[:, :1])], dim=1)
        out = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.attn,
            position_ids=self.position,
            **{self.cache_key: self.cache},
            use_cache=True,
        )
        self.position = self.position + 1
        return out.logits[:, -1].float()

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.attn, self.position = self.attn[rows], self.position[rows]


def stepper(model, fast: bool, room: int = 0):
    """The fast Llama-family decoder when it reproduces ``model`` exactly, else the HF forward.

    ``room``: decoding steps to reserve cache space for after the prompt.
    """
    from rlvr.generation import fast_decode

    if fast and fast_decode.supports(model):
        return fast_decode.FastDecoder(model, room=room)
    return HFStepper(model)


def sample_lean(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    sampling: SamplingConfig,
    eos_ids: list[int],
    pad_id: int,
    *,
    group: int = 1,
    prune: bool = True,
    fast: bool = True,
    draw: str = "cdf",
) -> torch.Tensor:
    """[N, T] tokens from a KV-cached loop; rows that finished get ``pad_id``.

    ``group``: the rows come in contiguous runs of ``group`` copies of one prompt; each
    distinct prompt is prefilled once and its KV cache copied to its ``group`` rows.
    ``prune``, ``fast`` and ``draw``: see :class:`LeanOptions`.
    """
    n, device = prompt_ids.shape[0], prompt_ids.device
    step = stepper(model, fast, room=sampling.max_new_tokens)
    logits = prefill(step, prompt_ids, prompt_mask, group)
    eos = torch.tensor(eos_ids, device=device)
    tokens = torch.full((n, sampling.max_new_tokens), pad_id, dtype=torch.long, device=device)
    rows = torch.arange(n, device=device)  # original index of each row still in the batch
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    for t in range(sampling.max_new_tokens):
        token = draw_tokens(logits.float(), sampling, draw)  # [rows]
        token = torch.where(finished, torch.full_like(token, pad_id), token)
        tokens[rows, t] = token
        finished |= torch.isin(token, eos)
        if t + 1 == sampling.max_new_tokens or bool(finished.all()):
            return tokens[:, : t + 1]
        if prune and bool(finished.any()):
            keep = (~finished).nonzero().squeeze(1)
            step.keep(keep)
            rows, token, finished = rows[keep], token[keep], finished[keep]
        logits = step.decode(token)
    return tokens


def draw_tokens(logits: torch.Tensor, sampling: SamplingConfig, draw: str) -> torch.Tensor:
    """[N] tokens from [N, V] float32 logits: argmax at temperature 0, else by ``draw``."""
    if sampling.temperature == 0 or draw == "multinomial":
        return next_tokens(logits, sampling)
    return inverse_cdf(torch.softmax(warp_logits(logits, sampling), dim=-1))


def inverse_cdf(probs: torch.Tensor) -> torch.Tensor:
    """[N] one draw per row of [N, V] probabilities: the first token whose cumulative mass
    exceeds ``u x total``, ``u ~ U[0, 1)``, in float64 (so a token's chance is its
    probability to ~1e-16; tokens of probability 0 are never drawn)."""
    cdf = probs.double().cumsum(dim=-1)  # [N, V]
    u = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device)
    index = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)  # [N]
    over = index >= probs.shape[1]  # u * total rounded up to the total (chance ~2^-53)
    if bool(over.any()):
        last = probs.shape[1] - 1 - (probs.flip(-1) > 0).int().argmax(dim=-1)
        index = torch.where(over, last, index)
    return index


def prefill(step, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group: int) -> torch.Tensor:
    """[N, V] last-position logits; each run of ``group`` identical rows is computed once."""
    if group == 1:
        return step.prefill(prompt_ids, prompt_mask)
    n = prompt_ids.shape[0]
    if n % group:
        raise ValueError(f"{n} prompt rows do not come in groups of {group}")
    logits = step.prefill(prompt_ids[::group], prompt_mask[::group])  # [N / group, V]
    rows = torch.arange(n // group, device=prompt_ids.device).repeat_interleave(group)
    step.keep(rows)  # each prompt's cache, copied to its group
    return logits[rows]


def new_cache(model):
    """An empty ``DynamicCache`` (transformers 5 takes the config; 4.x takes nothing)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


def cache_keyword(model) -> str:
    """The name ``model.forward`` takes its KV cache under: ``cache`` from transformers 5.24
    (where ``past_key_values`` is deprecated), ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def accepts_logits_to_keep(model) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep`` (logits of the last positions only)."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters
