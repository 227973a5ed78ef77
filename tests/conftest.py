"""Shared fixtures. Tests never touch the Hugging Face Hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

TINY_CORPUS = [
    "What is 12 + 7? Answer: 19",
    "Calculate 5 - 3 - 6. The answer is -4.",
    "<think>3 times 4 is 12</think> \\boxed{12}",
    "State the final answer: 40 + 2 = 42",
] * 20


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A local HF directory with a random 2-layer Qwen2 model and its own tokenizer."""
    from rlvr.models.tiny import TinySize, build_tokenizer, random_model

    path = tmp_path_factory.mktemp("tiny-random")
    tokenizer = build_tokenizer(TINY_CORPUS, vocab_size=300)
    model = random_model(
        tokenizer, TinySize(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture()
def tiny_model(tiny_model_dir):
    """``(model, tokenizer)`` loaded fresh from :func:`tiny_model_dir`."""
    from rlvr.models import load_model

    return load_model(str(tiny_model_dir))
