"""Loading the policy to train: dropout off, lean activations, optional gradient checkpointing."""

from __future__ import annotations

from pathlib import Path

import torch

from rlvr.models import quiet_hf_progress
from rlvr.ops.lora_linear import lean_lora
from rlvr.ops.rmsnorm import lean_rmsnorm
from rlvr.ops.swiglu import lean_swiglu
from rlvr.train.checkpoint import delete_to_resume
from rlvr.train.config import ModelConfig
from rlvr.train.lora import add_adapters, load_adapters


def load_policy(cfg: ModelConfig, path: str | None = None):
    """``(model, tokenizer)`` ready to train: dropout off, SwiGLU MLPs that keep half their
    activations (:mod:`rlvr.ops.swiglu`), RMSNorms that keep one of their two
    (:mod:`rlvr.ops.rmsnorm`), optional gradient checkpointing, LoRA adapters with
    ``cfg.lora.rank > 0`` (:mod:`rlvr.train.lora`; resuming from ``path`` then loads the base
    model ``cfg.name`` and the adapters saved in ``path``)."""
    from rlvr.models import load_model

    adapters = cfg.lora.rank > 0
    source = cfg.name if adapters else (path or cfg.name)  # resuming adapters: on the base
    with quiet_hf_progress():  # a preset's own build progress still shows
        try:
            model, tokenizer = load_model(source, dtype=cfg.dtype, device=cfg.device)
        except ValueError as err:  # a damaged checkpoint: say which one a resume can use
            if source != path:
                raise
            raise ValueError(f"{str(err).rstrip('.')}; {delete_to_resume(Path(path))}") from None
    disable_dropout(model)
    if adapters:  # before the lean MLPs, which see the adapted projections and keep their terms
        add_adapters(model, cfg.lora)
        if path:
            load_adapters(model, Path(path))
    lean_lora(model)  # adapted layers: one output-sized tensor per call instead of three
    lean_swiglu(model)  # same values and gradients, half the MLP activations kept for backward
    lean_rmsnorm(model)  # same values, one activation per norm kept instead of two
    if cfg.gradient_checkpointing:
        enable = (
            getattr(model, "activation_checkpointing_enable", None)
            or model.gradient_checkpointing_enable
        )
        enable()
        model.train()  # HF models checkpoint only in training mode; dropout is off anyway
    return model, tokenizer


def disable_dropout(model: torch.nn.Module) -> None:
    """Set every dropout probability to 0 (log-probs must not depend on the module's mode)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    for name in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if hasattr(model.config, name):
            setattr(model.config, name, 0.0)
