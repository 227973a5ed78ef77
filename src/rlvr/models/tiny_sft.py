"""The supervised warm start of the ``tiny`` preset.

A minimal SFT loop: token-mean negative log-likelihood of the response tokens, prompt
tokens masked, AdamW with linear warm-up and cosine decay. It exists so the preset can
be built before the trainer's library SFT function (``rlvr sft``) is available; once that
lands, :func:`_warm_start` is to be replaced by a call to it with the same settings.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

IGNORE_INDEX = -100
"""Label of a position that does not count in the loss (prompt and padding)."""


@dataclass(frozen=True)
class SftSettings:
    """How the tiny model is warm-started."""

    steps: int = 600
    """Optimizer steps."""
    batch_size: int = 64
    """Prompt/response pairs per step, drawn at random without replacement within a step."""
    lr: float = 3e-3
    """Peak learning rate."""
    warmup_steps: int = 20
    """Steps of linear warm-up from ``lr / warmup_steps`` to ``lr``; cosine decay to 0 after."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_beta2: float = 0.95
    """AdamW second-moment decay (``beta1`` is 0.9)."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    seed: int = 0
    """Seed of the batch order."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(
                f"steps and batch_size must be >= 1, got {self.steps} and {self.batch_size}"
            )
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")


@dataclass
class SftBatch:
    """A right-padded batch of ``B`` prompt+response sequences."""

    input_ids: torch.Tensor
    """[B, L] prompt then response then EOS, padded with the pad token."""
    attention_mask: torch.Tensor
    """[B, L] 1 on real tokens."""
    labels: torch.Tensor
    """[B, L] the response and EOS tokens; ``IGNORE_INDEX`` on prompt and padding."""


def encode_pairs(tokenizer, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """``(prompt ids, response ids + EOS)`` per pair; the prompt goes through the chat template."""
    encoded = []
    for prompt, response in pairs:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [
            tokenizer.eos_token_id
        ]
        encoded.append((prompt_ids, response_ids))
    return encoded


def collate(encoded: Sequence[tuple[list[int], list[int]]], pad_id: int) -> SftBatch:
    """Right-pad encoded pairs into one :class:`SftBatch`."""
    length = max(len(p) + len(r) for p, r in encoded)
    input_ids = torch.full((len(encoded), length), pad_id, dtype=torch.long)
    labels = torch.full((len(encoded), length), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(encoded), length), dtype=torch.long)
    for row, (prompt, response) in enumerate(encoded):
        end = len(prompt) + len(response)
        input_ids[row, :end] = torch.tensor(prompt + response)
        labels[row, len(prompt) : end] = torch.tensor(response)
        attention_mask[row, :end] = 1
    return SftBatch(input_ids, attention_mask, labels)


def response_nll(model, batch: SftBatch) -> torch.Tensor:
    """Token-mean NLL of the labelled tokens (each predicted from the tokens before it)."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[
        :, :-1
    ]  # [B, L-1, V]
    targets = batch.labels[:, 1:]  # [B, L-1]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=IGNORE_INDEX
    )


def lr_at(step: int, settings: SftSettings) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up, then cosine to 0."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    return settings.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def _warm_start(
    model,
    tokenizer,
    pairs: Sequence[tuple[str, str]],
    settings: SftSettings,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Fine-tune ``model`` in place on ``(prompt, response)`` pairs; returns the loss of every step.

    To be replaced by the trainer's library SFT function once it lands (same loss: token
    mean over response tokens, prompt masked). ``on_step(step, loss)`` is called after
    every step (progress reports). The model is left in eval mode.
    """
    if not pairs:
        raise ValueError("pairs is empty: nothing to warm-start on")
    encoded = encode_pairs(tokenizer, pairs)
    order = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=settings.lr,
        betas=(0.9, settings.adam_beta2),
        weight_decay=settings.weight_decay,
    )
    losses = []
    model.train()
    for step in range(settings.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, settings)
        batch = collate(
            order.sample(encoded, min(settings.batch_size, len(encoded))), tokenizer.pad_token_id
        )
        loss = response_nll(model, batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses
