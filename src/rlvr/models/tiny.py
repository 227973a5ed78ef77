"""Small Qwen2-architecture models with a tokenizer trained on a task corpus.

The building blocks of the ``tiny`` preset and of the test suite's random model: a
byte-level BPE tokenizer that splits digits (so arithmetic stays learnable at a tiny
vocabulary), with a ChatML template, and a randomly initialised ``Qwen2ForCausalLM``.

By default the BPE merges may cross spaces, so the fixed phrases of a task corpus
("State the final answer to the following arithmetic problem: ", " + ", "</think>") become
single tokens: sequences are about 40% shorter than with word-level pre-splitting, which
is most of the cost on a CPU. Digits are always single tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class TinySize:
    """Shape of a tiny Qwen2 model."""

    hidden_size: int = 64
    """Width of the residual stream."""
    num_layers: int = 2
    """Transformer blocks."""
    num_heads: int = 4
    """Attention heads (key/value heads are the same number)."""
    intermediate_size: int = 256
    """MLP width."""
    max_position_embeddings: int = 1024
    """Longest sequence the rotary embedding is configured for."""


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 512, *, split_words: bool = False):
    """Train a digit-splitting byte-level BPE tokenizer on ``corpus``.

    Returns a ``PreTrainedTokenizerFast`` whose EOS is ``<|im_end|>`` (the end of an
    assistant turn), pad is ``<|endoftext|>``, with a ChatML chat template. With
    ``split_words`` the text is first cut at word boundaries (GPT-2 style), so no token
    spans a space. Load a saved copy with :func:`rlvr.models.load_tokenizer` (plain
    ``AutoTokenizer`` would swap in Qwen2's own pre-tokenizer).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split_words),
        ]
    )
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_config(
    vocab_size: int,
    size: TinySize = TinySize(),
    *,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
):
    """The ``Qwen2Config`` of a tiny model of ``size`` over ``vocab_size`` tokens."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_heads,
        max_position_embeddings=size.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )


def random_model(tokenizer, size: TinySize = TinySize(), seed: int = 0):
    """A randomly initialised ``Qwen2ForCausalLM`` sized for ``tokenizer``."""
    import torch
    from transformers import Qwen2ForCausalLM

    ids = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    config = tiny_config(len(tokenizer), size, **ids)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def chat_corpus(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Tokenizer training text for ``(prompt, response)`` pairs, as the chat template lays them out.

    The special tokens are left out (they are added to the vocabulary whole); the role
    names stay, so ``user`` and ``assistant`` get merged like any frequent word.

    >>> chat_corpus([("1 + 1 =", "2")])
    ['user\\n1 + 1 =\\nassistant\\n2\\n']
    """
    return [f"user\n{prompt}\nassistant\n{response}\n" for prompt, response in pairs]


def build_task_tokenizer(pairs: Iterable[tuple[str, str]], vocab_size: int = 512):
    """A tokenizer trained on the chat-formatted ``(prompt, response)`` pairs of a task."""
    return build_tokenizer(chat_corpus(pairs), vocab_size=vocab_size)
