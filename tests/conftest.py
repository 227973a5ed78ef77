"""Shared fixtures. Tests never touch the Hugging Face Hub."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# model.device=auto is the CPU in the tests on a GPU machine too: their numbers are the CPU's
# (tests of CUDA name it; tests of auto itself remove this)
os.environ.setdefault("RLVR_AUTO_DEVICE", "cpu")

import pytest  # noqa: E402

# --------------------------------------- test verifiers and prompt files (trainer, pipeline tests)


def _contains(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` when the completion contains the reference string."""
    return correct if str(reference) in completion else wrong


def _even(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def _raises(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier that always fails."""
    raise RuntimeError("broken verifier")


def _register_test_verifiers() -> None:
    from rlvr.rewards import register

    register("contains")(_contains)
    register("raises")(_raises)
    register("even")(_even)


_register_test_verifiers()

SFT_PAIRS = [
    {"prompt": "What is 12 + 7?", "response": "12 + 7 = 19. Answer: 19"},
    {"prompt": "What is 5 - 3?", "response": "5 - 3 = 2. Answer: 2"},
    {"prompt": "What is 40 + 2?", "response": "40 + 2 = 42. Answer: 42"},
    {"prompt": "What is 3 times 4?", "response": "3 times 4 is 12. Answer: 12"},
    {"prompt": "Calculate 5 - 3 - 6.", "response": "5 - 3 - 6 = -4. Answer: -4"},
    {"prompt": "What is 7 + 7?", "response": "7 + 7 = 14. Answer: 14"},
]


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture()
def sft_file(tmp_path):
    """Six prompt/response pairs in a JSONL file."""
    return write_jsonl(tmp_path / "sft.jsonl", SFT_PAIRS)


PROMPTS = [
    {"prompt": f"What is {a} + {b}?", "answer": str(d)}
    for a, b, d in [(12, 7, 1), (5, 3, 2), (40, 2, 4), (3, 4, 7), (7, 7, 1), (9, 1, 0)]
]


@pytest.fixture()
def prompt_file(tmp_path):
    """Six prompts whose reference is a digit the completion should contain."""
    return write_jsonl(tmp_path / "prompts.jsonl", PROMPTS)


# ------------------------------------------------------------------ models

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


def make_random_llama(
    seed: int = 0, *, kv_heads: int = 2, tie: bool = False, family: str = "Llama", **config
):
    """A random 2-layer Llama (hidden 32, 4 heads, ``kv_heads`` key/value heads, vocab 97), or
    of another transformers ``family`` (``Mistral``, ``Qwen3``) with ``config`` on top."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = getattr(transformers, f"{family}Config")(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=128,
        tie_word_embeddings=tie,
        **config,
    )
    return getattr(transformers, f"{family}ForCausalLM")(config).eval()


@pytest.fixture()
def random_llama():
    """``make(seed=0, *, kv_heads=2, tie=False)`` -> a random 2-layer Llama in eval mode."""
    return make_random_llama


SYNC_METHODS = (
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "item",
    "tolist",
    "cpu",
    "numpy",
    "nonzero",
    "masked_select",
    "unique",
)
"""``torch.Tensor`` methods that read a tensor's values on the host (a host-device sync on a GPU)."""


@pytest.fixture()
def count_syncs(monkeypatch):
    """``count_syncs()`` -> a context manager yielding a ``Counter`` of host-device syncs.

    Counts calls of :data:`SYNC_METHODS` and indexing with a bool tensor (its output shape
    depends on the values) while the context is open, on any device. On CUDA, pair it with
    ``torch.cuda.set_sync_debug_mode`` for the syncs made below Python.
    """
    import collections
    import contextlib
    import functools

    import torch

    active = []

    def counted(name, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            if active:
                active[-1][name] += 1
            return method(*args, **kwargs)

        return wrapper

    def indexed(name, method):
        @functools.wraps(method)
        def wrapper(self, index, *args):
            parts = index if isinstance(index, tuple) else (index,)
            if active and any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                active[-1][f"{name}[bool]"] += 1
            return method(self, index, *args)

        return wrapper

    for name in SYNC_METHODS:
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    for name in ("__getitem__", "__setitem__"):
        monkeypatch.setattr(torch.Tensor, name, indexed(name, getattr(torch.Tensor, name)))
    for name in ("nonzero", "masked_select", "unique"):
        monkeypatch.setattr(torch, name, counted(f"torch.{name}", getattr(torch, name)))

    @contextlib.contextmanager
    def count():
        active.append(collections.Counter())
        try:
            yield active[-1]
        finally:
            active.pop()

    return count


# ------------------------------------------------------------------ Hugging Face cache


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache in a temporary ``HF_HOME``, in use by ``huggingface_hub``,
    ``transformers`` and ``datasets`` here and by the commands a test starts (``HF_HOME`` is
    set): a :class:`tests.hub_cache.HubCache` to put Hub models and datasets into, read
    offline as a machine that downloaded them reads them."""
    from tests.hub_cache import HubCache, use

    cache = HubCache(tmp_path / "hf-home")
    use(cache, monkeypatch)
    return cache
