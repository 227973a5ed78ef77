"""Sampling groups of completions from a causal LM.

One function, :func:`generate`, shared by the trainer's rollouts and by the evaluation
harness, so that training reward and evaluation score come from the same sampler.
Prompts are fully formatted strings (the data layer applies chat templates); they are
tokenised without extra special tokens and left-padded, completions are right-padded.
:func:`generate_ids` takes prompts already tokenised.

Two engines: ``"hf"`` is ``model.generate``; ``"lean"`` (default) is a plain KV-cached
loop that applies temperature, top-k and top-p exactly as Hugging Face's logits warpers
do (same order, same RNG draws), prefills each distinct prompt once for its ``n`` samples
(the KV cache is copied to them), drops rows from the batch once they emit EOS, and for
Llama-family models computes each step with :mod:`rlvr.fast_decode` instead of the
Hugging Face forward. Tests check that, without the row dropping, both engines draw
identical tokens, and that with it every row still samples from its own distribution
(greedy output is identical).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

ENGINES = ("lean", "hf")


@dataclass(frozen=True)
class SamplingConfig:
    """How completions are sampled."""

    max_new_tokens: int = 256
    """Longest completion; a completion that reaches it without EOS is ``truncated``."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 disables it)."""
    top_k: int = 0
    """Keep only the ``top_k`` most likely tokens (0 disables it)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")


@dataclass
class Generation:
    """``N = len(prompts) * n`` completions, grouped contiguously by prompt."""

    prompt_ids: torch.Tensor
    """[N, P] prompt tokens, left-padded with the pad token."""
    prompt_mask: torch.Tensor
    """[N, P] 1 on real prompt tokens."""
    response_ids: torch.Tensor
    """[N, T] sampled tokens, right-padded; T <= max_new_tokens."""
    response_mask: torch.Tensor
    """[N, T] 1 on generated tokens up to and including the EOS token."""
    truncated: torch.Tensor
    """[N] bool: the completion hit ``max_new_tokens`` without an EOS."""
    texts: list[str]
    """N decoded completions, special tokens removed."""
    prompt_index: list[int]
    """N indices into ``prompts``: completion j answers ``prompts[prompt_index[j]]``."""

    @property
    def response_lengths(self) -> torch.Tensor:
        """[N] number of generated tokens (EOS included)."""
        return self.response_mask.sum(dim=1)


def _eos_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a completion (model's generation config and tokenizer)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the model and tokenizer define no EOS token; completions could never end")
    return ids


def response_mask_from_ids(
    response_ids: torch.Tensor, eos_ids: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [N, T], truncated [N])``: mask covers tokens up to and including the first EOS."""
    is_eos = torch.isin(response_ids, torch.tensor(list(eos_ids), device=response_ids.device))
    seen_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # EOS tokens strictly before t
    mask = (seen_before == 0).long()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    n: int = 1,
    sampling: SamplingConfig = SamplingConfig(),
    engine: str = "lean",
) -> Generation:
    """Sample ``n`` completions for each prompt (uses the global torch RNG)."""
    if not prompts:
        raise ValueError("prompts is empty")
    enc = tokenizer(list(prompts), add_special_tokens=False)
    return generate_ids(model, tokenizer, enc["input_ids"], n=n, sampling=sampling, engine=engine)


def generate_ids(
    model,
    tokenizer,
    prompt_ids: Sequence[Sequence[int]],
    *,
    n: int = 1,
    sampling: SamplingConfig = SamplingConfig(),
    engine: str = "lean",
) -> Generation:
    """Like :func:`generate` for prompts given as token ids (each non-empty)."""
    if not prompt_ids:
        raise ValueError("prompt_ids is empty")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {list(ENGINES)}, got {engine!r}")
    if any(len(ids) == 0 for ids in prompt_ids):
        raise ValueError("prompt_ids contains an empty prompt")
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    device = next(model.parameters()).device
    ids, mask = left_pad(prompt_ids, pad_id)
    prompt_ids_t = ids.repeat_interleave(n, dim=0).to(device)
    prompt_mask = mask.repeat_interleave(n, dim=0).to(device)
    with torch.inference_mode():
        if engine == "lean":
            response_ids = _sample_lean(
                model, prompt_ids_t, prompt_mask, sampling, eos_ids, pad_id, group=n
            )
        else:
            response_ids = _sample_hf(model, prompt_ids_t, prompt_mask, sampling, eos_ids, pad_id)
    mask, truncated = response_mask_from_ids(response_ids, eos_ids)
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, pad_id))
    texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return Generation(
        prompt_ids=prompt_ids_t,
        prompt_mask=prompt_mask,
        response_ids=response_ids,
        response_mask=mask,
        truncated=truncated,
        texts=texts,
        prompt_index=[i for i in range(len(prompt_ids)) for _ in range(n)],
    )


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids [N, P], mask [N, P])``: token lists left-padded to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.as_tensor(list(row), dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids, mask


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """[N, L] positions counted over real tokens (0 on left padding), as HF generate does."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


def warp_logits(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """[N, V] float32 logits after temperature, top-k and top-p (HF's warper order and maths)."""
    scores = logits / sampling.temperature if sampling.temperature != 1.0 else logits
    if sampling.top_k:
        kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]))[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if sampling.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        remove = sorted_scores.softmax(dim=-1).cumsum(dim=-1) <= (1 - sampling.top_p)
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
    return scores


def next_tokens(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """[N] tokens drawn from [N, V] float32 logits (argmax when temperature is 0)."""
    if sampling.temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(warp_logits(logits, sampling), dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(1)


class _HFStepper:
    """Prefill / decode / keep over the model's own forward and ``DynamicCache`` (any causal LM)."""

    def __init__(self, model) -> None:
        self.model = model
        self.keep_last = {"logits_to_keep": 1} if _accepts_logits_to_keep(model) else {}

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        self.cache, self.attn = _new_cache(self.model), mask
        positions = position_ids_from_mask(mask)
        self.position = positions[:, -1:] + 1  # [N, 1]; the last prompt column is real in every row
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=self.cache,
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
            past_key_values=self.cache,
            use_cache=True,
        )
        self.position = self.position + 1
        return out.logits[:, -1].float()

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.attn, self.position = self.attn[rows], self.position[rows]


def _stepper(model, fast: bool):
    """The fast Llama-family decoder when it reproduces ``model`` exactly, else the HF forward."""
    from rlvr import fast_decode

    return (
        fast_decode.FastDecoder(model)
        if fast and fast_decode.supports(model)
        else _HFStepper(model)
    )


def _sample_lean(
    model,
    prompt_ids,
    prompt_mask,
    sampling,
    eos_ids,
    pad_id,
    *,
    group: int = 1,
    prune: bool = True,
    fast: bool = True,
) -> torch.Tensor:
    """[N, T] tokens from a KV-cached loop; rows that finished get ``pad_id``.

    ``group``: the rows come in contiguous runs of ``group`` copies of one prompt; each
    distinct prompt is prefilled once and its KV cache copied to its ``group`` rows.

    With ``prune`` a row leaves the batch (and its KV cache) once it has emitted EOS, so
    the remaining rows are computed alone; each row's tokens are still drawn from its own
    warped distribution, but after the first row finishes the RNG stream is split over
    fewer rows than ``model.generate`` would use, so draws differ from HF's from then on.
    ``fast`` uses :mod:`rlvr.fast_decode` for the models it supports.
    """
    n, device = prompt_ids.shape[0], prompt_ids.device
    step = _stepper(model, fast)
    logits = _prefill(step, prompt_ids, prompt_mask, group)
    eos = torch.tensor(eos_ids, device=device)
    tokens = torch.full((n, sampling.max_new_tokens), pad_id, dtype=torch.long, device=device)
    rows = torch.arange(n, device=device)  # original index of each row still in the batch
    finished = torch.zeros(n, dtype=torch.bool, device=device)
    for t in range(sampling.max_new_tokens):
        token = next_tokens(logits.float(), sampling)  # [rows]
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


def _prefill(step, prompt_ids, prompt_mask, group: int) -> torch.Tensor:
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


def _sample_hf(model, prompt_ids, prompt_mask, sampling, eos_ids, pad_id) -> torch.Tensor:
    """[N, T] tokens from ``model.generate``."""
    greedy = sampling.temperature == 0
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        max_new_tokens=sampling.max_new_tokens,
        do_sample=not greedy,
        # Explicit values: a model's generation_config may carry its own (e.g. top_k=50).
        temperature=1.0 if greedy else sampling.temperature,
        top_p=1.0 if greedy else sampling.top_p,
        top_k=0 if greedy else sampling.top_k,
        eos_token_id=eos_ids,
        pad_token_id=pad_id,
    )
    return out[:, prompt_ids.shape[1] :]


def _new_cache(model):
    """An empty ``DynamicCache`` (transformers 5 takes the config; 4.x takes nothing)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()


def _accepts_logits_to_keep(model) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters
