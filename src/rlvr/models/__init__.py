"""Loading causal language models by hub name, local directory, or preset name.

``load_model("tiny")`` and ``load_model("smollm2-135m")`` build (once) and cache a plain
Hugging Face directory offline; any other string is handed to ``transformers`` as a hub
name or local path, and a local folder of PEFT LoRA adapters as its base model with the
adapters merged (:mod:`rlvr.models.adapters`). Presets register themselves in
:data:`PRESETS` with :func:`register_preset`; the built-in ones live in the modules
:data:`BUILTIN_PRESETS` names and are imported (so registered) the first time their name is
asked for. Building a preset may train (``tiny`` runs a supervised warm start), so its
builder lives in a layer above the trainer (:mod:`rlvr.presets`); this package only loads
models.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rlvr.builtins import available, load_builtin
from rlvr.models.adapters import ADAPTER_CONFIG, adapter_base, merge_adapters

# name -> builder(cache_root) that returns a local HF model directory (building it once).
PRESETS: dict[str, Callable[[Path], Path]] = {}

PRESET_CONFIGS: dict[str, Callable[[Path], Any]] = {}
"""Preset name -> ``config(cache_root)``: the transformers config of the model the preset
builds, read without building it (``None`` when only the build tells)."""

PRESET_NEEDS: dict[str, Callable[[Path], str | None]] = {}
"""Preset name -> ``needs(cache_root)``: what building it needs that this machine lacks (a
package, as an install command), ``None`` when nothing (or the preset is built)."""

BUILTIN_PRESETS: dict[str, str] = {
    "tiny": "rlvr.presets.tiny",
    "smollm2-135m": "rlvr.models.smollm2",
}
"""Preset name -> the module that registers it, imported on first use."""

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "tekken.json",
)
"""Files one of which a local directory holds when it holds a tokenizer ``AutoTokenizer`` can read."""

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def register_preset(
    name: str,
    *,
    config: Callable[[Path], Any] | None = None,
    needs: Callable[[Path], str | None] | None = None,
) -> Callable[[Callable[[Path], Path]], Callable[[Path], Path]]:
    """Decorator: register ``builder(cache_root) -> model_dir`` under ``name``; ``config``:
    see :data:`PRESET_CONFIGS` (without it, checks of the model's layers wait for the build);
    ``needs``: see :data:`PRESET_NEEDS` (what a dry run names)."""

    def wrap(builder: Callable[[Path], Path]) -> Callable[[Path], Path]:
        PRESETS[name] = builder
        if config is not None:
            PRESET_CONFIGS[name] = config
        if needs is not None:
            PRESET_NEEDS[name] = needs
        return builder

    return wrap


def preset_needs(name: str) -> str | None:
    """What building the preset ``name`` needs that this machine lacks, else ``None`` (also
    for a built preset, or a name that is no preset)."""
    load_builtin(name, PRESETS, BUILTIN_PRESETS)
    needs = PRESET_NEEDS.get(name)
    return needs(cache_root()) if needs is not None else None


def cache_root() -> Path:
    """Where presets are cached: ``$RLVR_CACHE`` or ``~/.cache/rlvr``."""
    return Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))


def resolve_model_path(name_or_path: str) -> str:
    """A preset name becomes its cached directory, ``~`` the home folder; anything else is unchanged."""
    load_builtin(name_or_path, PRESETS, BUILTIN_PRESETS)
    if name_or_path in PRESETS:
        return str(PRESETS[name_or_path](cache_root()))
    return os.path.expanduser(name_or_path) if name_or_path.startswith("~") else name_or_path


def context_length(model: Any) -> int | None:
    """The context of ``model`` (a model, or its ``config``) in tokens: its config's
    ``max_position_embeddings``; ``None`` when it does not say."""
    return getattr(getattr(model, "config", model), "max_position_embeddings", None)


def preset_names() -> list[str]:
    """Every preset name :func:`load_model` accepts."""
    return available(PRESETS, BUILTIN_PRESETS)


def torch_dtype(name: str) -> torch.dtype:
    """``"float32" | "bfloat16" | "float16"`` -> ``torch.dtype``, with a clear error."""
    if name not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {name!r}")
    return _DTYPES[name]


def resolve_device(name: str) -> str:
    """``name``, with ``"auto"`` read as ``"cuda"`` when torch sees a CUDA GPU here, else ``"cpu"``
    (never ``mps``: name it); the environment variable ``RLVR_AUTO_DEVICE`` overrides what
    ``auto`` stands for (the tests set it to ``cpu``: their numbers are the CPU's)."""
    if name != "auto":
        return name
    return os.environ.get("RLVR_AUTO_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def torch_device(name: str) -> torch.device:
    """``"auto"`` (see :func:`resolve_device`), ``"cpu"``, ``"cuda:1"``, ``"mps"``, ... -> a
    ``torch.device`` this machine has, or a clear error."""
    name = resolve_device(name)
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"device must be auto or a torch device such as cpu, cuda, cuda:1 or mps, got {name!r}"
        ) from None
    backends = {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    missing = device.type in backends and not backends[device.type]()
    if device.type == "cuda" and device.index is not None and not missing:
        missing = device.index >= torch.cuda.device_count()
    if missing:
        raise ValueError(f"device {name!r} is not available to this torch ({torch.__version__})")
    return device


def load_tokenizer(name_or_path: str):
    """The tokenizer of a model (preset, local path or hub name), with a pad token set."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = resolve_model_path(name_or_path)
    _check_has_tokenizer(path)
    # AutoTokenizer would rebuild a Qwen2 model's tokenizer with Qwen2's own pre-tokenizer;
    # a generic tokenizer.json (ours) must be loaded as it was saved.
    try:
        cls = PreTrainedTokenizerFast if _is_generic_fast_tokenizer(path) else AutoTokenizer
        tokenizer = cls.from_pretrained(path)
    except ValueError as err:  # a damaged tokenizer file: "Expecting value: line 2 column 1"
        raise ValueError(f"could not load the tokenizer of {path!r}: {err}") from err
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _has_tokenizer_files(folder: str) -> bool:
    return any((Path(folder).expanduser() / name).is_file() for name in _TOKENIZER_FILES)


def _check_has_tokenizer(path: str) -> None:
    """A local directory without tokenizer files is an error (``transformers`` would build an empty one)."""
    if Path(path).expanduser().is_dir() and not _has_tokenizer_files(path):
        raise ValueError(
            f"the directory {path!r} holds no tokenizer (none of {', '.join(_TOKENIZER_FILES)}); "
            "save one next to the model with tokenizer.save_pretrained(directory)"
        )


def _is_generic_fast_tokenizer(path: str) -> bool:
    """Whether a local directory holds a generic ``tokenizer.json`` (saved as ``TokenizersBackend``)."""
    config = Path(path) / "tokenizer_config.json"
    if not (config.is_file() and (Path(path) / "tokenizer.json").is_file()):
        return False
    return json.loads(config.read_text()).get("tokenizer_class") == "TokenizersBackend"


def looks_like_path(name: str) -> bool:
    """Whether ``name`` can only be a local path (a hub id is ``owner/name``, never ``/x`` or ``a/b/c``)."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") >= 2


def check_model_dir(name: str) -> None:
    """Refuse a local model path that is not a directory holding ``config.json`` or PEFT
    adapters (a run directory or its ``checkpoints/``: naming its latest checkpoint), or that
    holds a model but no tokenizer (:func:`load_model` reads it from there); presets and hub
    names pass unread. A directory that exists here is local whatever its name (``runs/sft``,
    ``my-model``), as transformers reads it."""
    local = looks_like_path(name) or Path(name).expanduser().is_dir()
    if name in preset_names() or not local:
        return
    path = Path(name).expanduser()
    if path.is_file():
        raise ValueError(f"{name}: is a file; a model is the directory that holds its config.json")
    if not path.is_dir():
        raise ValueError(f"{name}: no such directory")
    if not (path / "config.json").is_file() and not (path / ADAPTER_CONFIG).is_file():
        steps = sorted((path / "checkpoints").glob("step_*")) or sorted(path.glob("step_*"))
        hint = f"; a run's models are its checkpoints, e.g. {steps[-1]}" if steps else ""
        raise ValueError(f"{name}: holds no model (no config.json){hint}")
    if not (path / ADAPTER_CONFIG).is_file() and not _has_tokenizer_files(str(path)):
        raise ValueError(
            f"{name}: holds a model but no tokenizer (none of {', '.join(_TOKENIZER_FILES)}); "
            "save one next to the model with tokenizer.save_pretrained(directory)"
        )
    base = adapter_base(str(path))
    try:
        if base is not None:
            check_model_dir(base)
    except ValueError as err:  # the run would stop there, naming no adapter
        raise ValueError(f"{name}: {ADAPTER_CONFIG} names the base model {err}") from None


@contextlib.contextmanager
def quiet_hf_progress():
    """No progress bar from transformers in the block ("Loading weights", "Writing model
    shards"): rlvr shows its own progress."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is a dependency
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _model_folder(name_or_path: str) -> tuple[str, str | None]:
    """``(path, base)``: where the model is, checked, and the base model of a folder of
    adapters (``None``: the folder holds a whole model, or the name is a Hub one)."""
    path = resolve_model_path(name_or_path)
    try:
        check_model_dir(path)
        return path, adapter_base(path)
    except ValueError as err:
        raise ValueError(f"could not load model {err}") from None


def device_notes(model: torch.nn.Module) -> list[str]:
    """What a run prints at its start about where ``model`` runs: nothing on the CPU; on
    another device, which (with a CUDA GPU's name), since ``auto`` chose it unasked."""
    device = next(model.parameters()).device
    if device.type == "cpu":
        return []
    name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    return [f"model on {device}{name}"]


def load_model(name_or_path: str, *, dtype: str = "float32", device: str = "auto"):
    """Load ``(model, tokenizer)``; the model is returned in eval mode on ``device``."""
    from transformers import AutoModelForCausalLM

    device = torch_device(device)
    path, base = _model_folder(name_or_path)
    if base is not None:  # its base model, the adapters merged; its own tokenizer if it has one
        model, tokenizer = load_model(base, dtype=dtype, device=device)
        if _has_tokenizer_files(path):
            tokenizer = load_tokenizer(path)
        return merge_adapters(model, path).eval(), tokenizer  # named by the folder
    from safetensors import SafetensorError

    try:
        with quiet_hf_progress():
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype))
    except SafetensorError as err:  # a truncated or damaged weights file
        raise ValueError(f"could not load model from {path!r}: damaged weights ({err})") from err
    except OSError as err:
        if Path(path).is_dir():
            raise ValueError(f"could not load model from the directory {path!r}: {err}") from err
        raise _not_found(f"model {name_or_path!r}", err) from err
    tokenizer = load_tokenizer(name_or_path)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.to(device).eval(), tokenizer


def model_tokenizer_and_config(name_or_path: str):
    """``(tokenizer, config)`` as :func:`load_model` gives them with the model, without loading
    its weights (a folder of adapters: its base model's config, its own tokenizer if it has one)."""
    from transformers import AutoConfig

    path, base = _model_folder(name_or_path)
    if base is not None:
        tokenizer, config = model_tokenizer_and_config(base)
        return (load_tokenizer(path) if _has_tokenizer_files(path) else tokenizer), config
    try:
        config = AutoConfig.from_pretrained(path)
    except OSError as err:
        if Path(path).is_dir():
            raise ValueError(f"could not load the config of model {name_or_path!r}: {err}") from err
        raise _not_found(f"the config of model {name_or_path!r}", err) from err
    except ValueError as err:
        raise ValueError(f"could not load the config of model {name_or_path!r}: {err}") from err
    return load_tokenizer(name_or_path), config


def _not_found(what: str, err: OSError) -> ValueError:
    """The error for a model that is no preset, no local directory and not on the Hub (or not
    cached with ``HF_HUB_OFFLINE`` set), in one line; ``what`` names what was loaded."""
    from huggingface_hub import constants

    hub = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else f"not reachable ({err})"
    return ValueError(
        f"could not load {what}: not a preset ({', '.join(preset_names())}), "
        f"not a local directory, and the Hugging Face Hub: {hub}"
    )


_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_WEIGHTS += ("pytorch_model.bin.index.json",)
"""The files one of which holds (or indexes) a Hub model's weights."""


def hub_cached(name: str) -> bool:
    """Whether the Hugging Face cache holds the Hub model ``name`` (its ``config.json`` and
    weights, or their index), which is what loading it reads with ``HF_HUB_OFFLINE`` set."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    def cached(file: str) -> bool:
        return isinstance(try_to_load_from_cache(name, file), str)

    try:
        return cached("config.json") and any(cached(file) for file in _WEIGHTS)
    except HFValidationError:  # not a repository id: never cached
        return False


def empty_model(name_or_path: str):
    """The layers of the model :func:`load_model` would load, without weights (on the meta
    device), or ``None`` when that takes a build or a download: read from a local directory's
    config (a folder of adapters: its base model's), a Hub model's cached one, or a preset's
    :data:`PRESET_CONFIGS`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    load_builtin(name_or_path, PRESETS, BUILTIN_PRESETS)
    if name_or_path in PRESETS:
        known = PRESET_CONFIGS.get(name_or_path)
        config = known(cache_root()) if known else None
    else:
        path = resolve_model_path(name_or_path)
        base = adapter_base(path)
        if base is not None:
            return empty_model(base)
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError):  # not cached, or a model transformers cannot build
            return None
    if config is None:
        return None
    try:
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config)
    except ValueError:  # no causal LM for this config: the run's load says so
        return None
