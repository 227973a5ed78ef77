"""Low-rank adapters on the policy (LoRA, Hu et al. 2021, eq. 3): added, switched off, merged.

The adapters are injected into the model itself (``peft.inject_adapter_in_model``), so the
policy stays the Hugging Face model that the samplers and the log-prob passes already take,
and only the adapters' parameters require gradients. The KL term's reference model is the
same model with its adapters switched off (:func:`adapters_off`): the base weights, with no
second copy in memory.

A checkpoint holds the merged model, each adapted weight replaced by ``W + alpha / r * B @ A``
(:func:`merged_state_dict`): a plain Hugging Face model that ``rlvr eval``, a pipeline's next
stage or any other tool loads. Its ``adapter/`` folder holds the adapters in PEFT's format
(:func:`save_adapters`), which ``peft.PeftModel.from_pretrained(base, folder)`` loads and
from which ``--resume`` continues exactly on the base model (:func:`load_adapters`).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch

from rlvr.ops.merged import plain_tensors
from rlvr.train.config import LoraConfig, ModelConfig

ADAPTER_DIR = "adapter"
"""The adapters in a checkpoint directory, next to the merged model, as PEFT saves them
(``adapter_config.json``, ``adapter_model.safetensors``). Not at the top: transformers would
then load the adapters onto their base instead of the merged model."""

_WEIGHTS = "adapter_model.safetensors"
_PEFT_PREFIX = "base_model.model."  # a PeftModel's prefix to its base model's names
PEFT_MISSING = "model.lora.rank: LoRA adapters need peft: pip install 'rlvr[lora]'"
"""What a run with ``model.lora`` says where peft is missing (its dry run adds that it would stop)."""


def _tuner_layer() -> type:
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError as err:
        raise ImportError(PEFT_MISSING) from err
    return BaseTunerLayer


def add_adapters(model: torch.nn.Module, cfg: LoraConfig) -> None:
    """Inject rank-``cfg.rank`` adapters (B = 0 at the start, so the model is unchanged) into
    ``cfg.targets`` and leave only them trainable."""
    _tuner_layer()  # the one-line error when peft is missing
    from peft import LoraConfig as PeftLoraConfig
    from peft import inject_adapter_in_model

    targets = "all-linear" if cfg.targets == ("all-linear",) else list(cfg.targets)
    if targets != "all-linear":
        _check_targets(model, cfg.targets)
    peft_cfg = PeftLoraConfig(
        r=cfg.rank, lora_alpha=cfg.alpha, target_modules=targets, lora_dropout=0.0, bias="none"
    )
    try:
        inject_adapter_in_model(peft_cfg, model)
    except ValueError as err:  # anything else peft refuses, on one line
        raise ValueError(f"model.lora.targets: {' '.join(str(err).split())}") from err
    _warn_full_rank(adapted_layers(model), cfg.rank)


def check_adapters(model: ModelConfig) -> str | None:
    """What :func:`add_adapters` refuses or warns about in ``model.lora``, checked on the
    model's layers without its weights (:func:`rlvr.models.empty_model`): for a dry run.
    Returns the note to give when the layers are not known here: a preset not built yet, or
    a Hub model whose configuration is not cached."""
    from rlvr.data.loading import is_local
    from rlvr.models import empty_model, preset_names

    if not model.lora.rank:
        return None
    layers = empty_model(model.name)
    if layers is None:
        if model.name in preset_names():
            why = "the run builds the preset first"
        elif not is_local(model.name):
            why = "a Hub model not read here: the run fetches it"
        else:  # a local model transformers cannot build: its load says so
            return None
        return f"model.lora: not checked against the layers of {model.name} ({why})"
    if importlib.util.find_spec("peft") is not None:
        add_adapters(layers, model.lora)
    elif model.lora.targets != ("all-linear",):  # a dry run for a machine that has peft
        _check_targets(layers, model.lora.targets)
    return None


def _warn_full_rank(layers: dict[str, torch.nn.Module], rank: int) -> None:
    """Warn when ``rank`` reaches a linear layer's smaller side: its ``B @ A`` can then be any
    update of the weight, with more parameters than the weight has (eq. 3 assumes
    ``r << min(d, k)``)."""
    sides = {
        name: min(layer.in_features, layer.out_features)
        for name, layer in layers.items()
        if isinstance(getattr(layer, "in_features", None), int)
    }
    full = [name for name, side in sides.items() if rank >= side]
    if full:
        warnings.warn(
            f"model.lora.rank={rank} reaches the smaller side of {len(full)} of the "
            f"{len(layers)} adapted layers ({full[0]}: {sides[full[0]]}): their adapters have "
            "more parameters than their weights and restrict nothing; use a lower rank, or "
            "rank 0 to train the weights themselves",
            stacklevel=3,
        )


_ADAPTABLE = (torch.nn.Linear, torch.nn.Embedding)


def _check_targets(model: torch.nn.Module, targets: tuple[str, ...]) -> None:
    """Each target names layers of ``model`` (as peft matches them: a module whose name is the
    target or ends with ``.<target>``) that are linear layers or embeddings; else one line
    listing the names the model's layers have."""
    names = [name for name, m in model.named_modules() if isinstance(m, _ADAPTABLE)]
    kinds = ", ".join(dict.fromkeys(name.rpartition(".")[2] for name in names))
    for target in targets:
        matched = [
            m for name, m in model.named_modules() if name == target or name.endswith(f".{target}")
        ]
        if not matched:
            raise ValueError(
                f"model.lora.targets: this model has no layer named {target!r}; its linear "
                f"layers and embeddings are {kinds} (or all-linear for every linear layer but "
                "the output head)"
            )
        other = next((m for m in matched if not isinstance(m, _ADAPTABLE)), None)
        if other is not None:
            raise ValueError(
                f"model.lora.targets: {target!r} is a {type(other).__name__}, not a linear "
                f"layer or embedding; this model's are {kinds}"
            )


def adapted_layers(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """Modules carrying adapters, by name (none for a model without them)."""
    if not any(".lora_" in name for name, _ in model.named_parameters()):
        return {}  # peft is not imported for a model without adapters
    layer = _tuner_layer()
    return {name: m for name, m in model.named_modules() if isinstance(m, layer)}


def has_adapters(model: torch.nn.Module) -> bool:
    """Whether ``model`` carries LoRA adapters."""
    return bool(adapted_layers(model))


def adapter_notes(model: torch.nn.Module) -> list[str]:
    """What a run prints at its start about ``model``'s adapters (nothing without them)."""
    layers = adapted_layers(model)
    if not layers:
        return []
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return [
        f"LoRA adapters on {len(layers)} layer{'s' if len(layers) > 1 else ''}: {trained:,} "
        "parameters train, the model's "
        f"{frozen:,} stay frozen"
    ]


@contextlib.contextmanager
def adapters_off(model: torch.nn.Module) -> Iterator[None]:
    """Run ``model`` on its base weights inside the block (a no-op without adapters)."""
    layers = list(adapted_layers(model).values())
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)


def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s state under the plain model's names, each adapted weight merged with its
    adapter on the CPU (so a GPU holds one extra layer at a time) and the adapters' own
    tensors left out (:func:`rlvr.ops.merged.plain_tensors`)."""
    return dict(plain_tensors(model, model.state_dict().items(), device="cpu"))


def heads_apart(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> bool:
    """Whether ``model`` ties its output head to its input embedding (``tie_word_embeddings``)
    while the merged ``state`` holds the two apart: an adapter on either one (``targets:
    [lm_head]`` or ``[embed_tokens]``) changes it alone, so the adapted model no longer ties them."""
    if not getattr(model.config, "tie_word_embeddings", False):
        return False
    names = {id(m): name for name, m in model.named_modules()}
    inp, out = model.get_input_embeddings(), model.get_output_embeddings()
    if inp is None or out is None:
        return False
    a, b = state.get(f"{names[id(inp)]}.weight"), state.get(f"{names[id(out)]}.weight")
    return a is not None and b is not None and not torch.equal(a, b)


def adapter_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' tensors under PEFT's names (the model's, without the adapter's name)."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().contiguous() for k, v in get_peft_model_state_dict(model).items()}


def save_adapters(model: torch.nn.Module, directory: Path) -> None:
    """Write the adapters to ``directory / ADAPTER_DIR`` in PEFT's format: its config (with
    the base model's name) and :func:`adapter_state` under a ``PeftModel``'s names."""
    from safetensors.torch import save_file

    folder = directory / ADAPTER_DIR
    folder.mkdir()
    config = copy.copy(model.peft_config["default"])
    config.base_model_name_or_path = model.name_or_path
    config.save_pretrained(str(folder))
    weights = {_PEFT_PREFIX + k: v for k, v in adapter_state(model).items()}
    save_file(weights, str(folder / _WEIGHTS))


def load_adapters(model: torch.nn.Module, directory: Path) -> None:
    """Set ``model``'s adapters to those saved in ``directory`` (by :func:`save_adapters`)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = directory / ADAPTER_DIR / _WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(
            f"{directory}: no {ADAPTER_DIR}/{_WEIGHTS}; this checkpoint was not written with "
            "model.lora"
        )
    saved = {k.removeprefix(_PEFT_PREFIX): v for k, v in load_file(str(path)).items()}
    own = adapter_state(model)
    if saved.keys() != own.keys() or any(saved[k].shape != own[k].shape for k in own):
        raise ValueError(
            f"{path}: its adapters do not match model.lora (rank or targets changed since)"
        )
    set_peft_model_state_dict(model, saved)
