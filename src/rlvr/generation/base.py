"""What every sampler shares: sampling settings, the :class:`Generation` it returns, padding and masks.

Prompts are token ids (the data layer applies chat templates and tokenises); they are
left-padded, completions are right-padded, and the ``n`` completions of a prompt are
contiguous rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from rlvr.generation.turns import end_of_turn

VARYING_SHAPE_ATTENTION = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)
"""The attention kernels rlvr's forward passes use: all but cuDNN's (chosen for bf16 and fp16
on recent GPUs), which pays for each new shape, and sampling meets a new shape at every step
(the KV cache grows, finished rows leave the batch). On an H200, bf16 decoding of the tiny
preset took 33 ms a step with cuDNN's kernel and 2 ms without (docs/benchmarks.md)."""


def varying_shape_attention() -> contextlib.AbstractContextManager:
    """Attention on :data:`VARYING_SHAPE_ATTENTION` inside the block."""
    return sdpa_kernel(list(VARYING_SHAPE_ATTENTION))


def product_dtype(device: torch.device) -> torch.dtype:
    """The dtype a float32 matrix product gets on ``device`` here: autocast's, when it is on."""
    one = torch.ones(1, 1, device=device)
    return torch.mm(one, one).dtype


def no_gradients(device: torch.device) -> contextlib.AbstractContextManager:
    """Inference mode, or under autocast ``no_grad``: autocast keeps its cast of a weight that
    trains for the rest of the block only outside inference mode, and would otherwise cast
    every weight again at every decoding step of the Hugging Face forward."""
    autocast = product_dtype(device) != torch.float32
    return torch.no_grad() if autocast else torch.inference_mode()


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
        if not 0 <= self.temperature < float("inf"):  # NaN too
            raise ValueError(f"temperature must be >= 0 and finite, got {self.temperature}")
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
    """N decoded completions, special tokens and the EOS removed."""
    prompt_index: list[int]
    """N indices into ``prompts``: completion j answers ``prompts[prompt_index[j]]``."""
    logprobs: torch.Tensor | None = None
    """[N, T] float32 log-probability of each sampled token under the distribution the
    sampler drew it from (temperature-scaled; top-k/top-p truncated where set), 0 on
    padding, when the backend reports it (``vllm``)."""

    @property
    def response_lengths(self) -> torch.Tensor:
        """[N] number of generated tokens (EOS included)."""
        return self.response_mask.sum(dim=1)


def eos_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a completion: the model's generation config's, the
    tokenizer's EOS, and the token its chat template ends an assistant turn with
    (:func:`~rlvr.generation.turns.end_of_turn`: Gemma's ``<end_of_turn>``, Llama 3's
    ``<|eot_id|>``), in that order."""
    config = getattr(model, "generation_config", None)
    ids = getattr(config, "eos_token_id", None)
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    for extra in (tokenizer.eos_token_id, end_of_turn(tokenizer)):
        if extra is not None and extra not in ids:
            ids.append(extra)
    if not ids:
        raise ValueError("the model and tokenizer define no EOS token; completions could never end")
    return ids


def pad_id(tokenizer, eos: Sequence[int]) -> int:
    """The padding token: the tokenizer's, else the first EOS."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]


def check_prompts(prompt_ids: Sequence[Sequence[int]], n: int) -> None:
    """``prompt_ids`` non-empty with no empty prompt; ``n >= 1``."""
    if not prompt_ids:
        raise ValueError("prompt_ids is empty")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if any(len(ids) == 0 for ids in prompt_ids):
        raise ValueError("prompt_ids contains an empty prompt")


def response_mask_from_ids(
    response_ids: torch.Tensor, eos: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [N, T], truncated [N])``: mask covers tokens up to and including the first EOS."""
    is_eos = torch.isin(response_ids, torch.tensor(list(eos), device=response_ids.device))
    seen_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # EOS tokens strictly before t
    mask = (seen_before == 0).long()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


def left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids [N, P], mask [N, P])``: token lists left-padded to the longest."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.as_tensor(list(row), dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids, mask


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """[N, L] positions counted over real tokens (0 on left padding), as HF generate does."""
    return (attention_mask.long().cumsum(-1) - 1).clamp_min(0)


def finish(
    tokenizer,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    response_ids: torch.Tensor,
    eos: Sequence[int],
    *,
    n: int,
    logprobs: torch.Tensor | None = None,
) -> Generation:
    """A :class:`Generation` from ``[N, P]`` prompts and raw ``[N, T]`` sampled tokens.

    Tokens after each row's first EOS become padding (and their log-probs 0); texts are
    decoded without special tokens, and without the EOS (an end-of-turn token the tokenizer
    holds as a plain added token, not marked special, is not the verifier's to see either).
    """
    padding = pad_id(tokenizer, eos)
    mask, truncated = response_mask_from_ids(response_ids, eos)
    kept = (mask.sum(dim=1) - (~truncated).long()).tolist()  # [N] tokens before the EOS
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, padding))
    if logprobs is not None:
        logprobs = torch.where(mask.bool(), logprobs.float(), torch.zeros_like(logprobs.float()))
    return Generation(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        response_ids=response_ids,
        response_mask=mask,
        truncated=truncated,
        texts=tokenizer.batch_decode(
            [row[:n] for row, n in zip(response_ids.tolist(), kept, strict=True)],
            skip_special_tokens=True,
        ),
        prompt_index=[i for i in range(prompt_ids.shape[0] // n) for _ in range(n)],
        logprobs=logprobs,
    )


@contextlib.contextmanager
def thread_count(n: int) -> Iterator[None]:
    """Torch runs ``n`` threads inside the block, the caller's count again after it."""
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            torch.set_num_threads(before)
