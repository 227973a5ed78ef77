"""A model given as a PEFT LoRA adapter folder: the base model it names, adapters merged.

PEFT (and TRL, and ``rlvr``'s own checkpoints under ``adapter/``) save LoRA adapters as a
folder with ``adapter_config.json``, naming the base model, and the adapters' weights, but
no model. :func:`rlvr.models.load_model` loads such a folder as its base model with each
adapter merged into its weight (``W + alpha / r * B A``): a plain model, as any other
model it loads.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"


def adapter_base(path: str) -> str | None:
    """The base model that the local folder ``path`` names when it holds PEFT adapters and no
    model (``adapter_config.json`` without ``config.json``); None for anything else."""
    folder = Path(path).expanduser()
    config = folder / ADAPTER_CONFIG
    if not config.is_file() or (folder / "config.json").is_file():
        return None
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{config} names no base model (base_model_name_or_path)")
    if Path(base).expanduser().resolve() == folder.resolve():
        raise ValueError(f"{config} names its own folder as its base model")
    return base


def merge_adapters(model, folder: str):
    """``model`` with the adapters saved in ``folder`` merged into its weights, named by
    ``folder`` (adapters trained on it later name the folder as their base), every weight
    trainable as in any model loaded from a directory."""
    try:
        from peft import PeftModel
    except ImportError as err:
        raise ValueError(
            f"{folder} holds LoRA adapters; loading them needs peft: pip install 'rlvr[lora]'"
        ) from err
    try:
        with warnings.catch_warnings():  # peft reads an attribute transformers deprecated
            warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
            merged = PeftModel.from_pretrained(model, folder).merge_and_unload()
    except (RuntimeError, ValueError, KeyError) as err:  # adapters made for another model
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        why = " ".join(lines[:2]) or type(err).__name__  # torch's heading and its first mismatch
        raise ValueError(
            f"{folder}: its adapters do not fit the base model its config names ({why})"
        ) from err
    merged.name_or_path = merged.config._name_or_path = str(folder)
    merged.requires_grad_(True)  # peft froze the base to load adapters: a plain model trains all
    return merged
