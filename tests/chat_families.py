"""Chat families' turn formats, with a tokenizer to test them on.

Each template is written here to render a family's turns as its model's own template does
(the tokens between turns, the role names, where a system message goes), not copied from the
model's files: what ``rlvr`` reads of a template is the token after an assistant message
(``rlvr.generation.turns.end_of_turn``). The tokenizer is the test suite's small BPE one with
the family's special tokens added and its EOS set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_EACH = "{% for m in messages %}"
_GEN = "{% endfor %}{% if add_generation_prompt %}"

GEMMA = (  # <start_of_turn>user ... <end_of_turn>; the assistant is "model"; no system role
    "{{ bos_token }}{% if messages[0].role == 'system' %}"
    "{{ raise_exception('no system role') }}{% endif %}" + _EACH + "<start_of_turn>"
    "{{ 'model' if m.role == 'assistant' else m.role }}\n{{ m.content | trim }}<end_of_turn>\n"
    + _GEN
    + "<start_of_turn>model\n{% endif %}"
)

LLAMA3 = (  # a header per turn, each turn ended by <|eot_id|>
    "{{ bos_token }}" + _EACH + "<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content | trim }}<|eot_id|>"
    + _GEN
    + "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

LLAMA31 = (  # as 3.0, and a system turn always first, with a dated preamble
    "{{ bos_token }}{% set system = messages[0].content if messages[0].role == 'system' "
    "else '' %}<|start_header_id|>system<|end_header_id|>\n\nToday Date: 26 Jul 2024\n\n"
    "{{ system }}<|eot_id|>{% for m in messages if m.role != 'system' %}"
    "<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>"
    + _GEN
    + "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

PHI3 = (  # <|user|>\n ... <|end|>\n, the assistant's turn likewise
    "{{ bos_token }}"
    + _EACH
    + "<|{{ m.role }}|>\n{{ m.content }}<|end|>\n"
    + _GEN
    + "<|assistant|>\n{% endif %}"
)

MISTRAL = (  # [INST] user [/INST]answer</s>; a system message joins the first user turn
    "{{ bos_token }}{% set ns = namespace(system='') %}"
    + _EACH
    + "{% if m.role == 'system' %}{% set ns.system = m.content + '\n\n' %}"
    "{% elif m.role == 'user' %}[INST] {{ ns.system }}{{ m.content }} [/INST]"
    "{% set ns.system = '' %}{% else %}{{ m.content }}</s>{% endif %}{% endfor %}"
)

_CHATML = (  # <|im_start|>role\n ... <|im_end|>\n
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    + _GEN
    + "<|im_start|>assistant\n{% endif %}"
)

QWEN25 = (  # ChatML, a default system turn when none is given
    "{% if messages[0].role != 'system' %}<|im_start|>system\nYou are a helpful assistant."
    "<|im_end|>\n{% endif %}" + _EACH + _CHATML
)

QWEN3 = (  # ChatML; an assistant turn keeps only what follows its reasoning
    _EACH + "{% set text = m.content.split('</think>')[-1].lstrip('\n') "
    "if m.role == 'assistant' else m.content %}<|im_start|>{{ m.role }}\n{{ text }}<|im_end|>\n"
    + _GEN
    + "<|im_start|>assistant\n{% endif %}"
)

SMOLLM2 = (  # ChatML, a default system turn naming the assistant when none is given
    _EACH + "{% if loop.first and m.role != 'system' %}<|im_start|>system\nYou are a small "
    "assistant.<|im_end|>\n{% endif %}" + _CHATML
)

GRANITE_CODE = (  # plain-text turns: no token at all after the answer
    _EACH + "{{ {'user': 'Question', 'system': 'System', 'assistant': 'Answer'}[m.role] }}:\n"
    "{{ m.content }}\n\n" + _GEN + "Answer:\n{% endif %}"
)


@dataclass(frozen=True)
class Family:
    """A chat model family: its template, special tokens, and the token that ends a turn."""

    template: str
    eos: str
    """The tokenizer's EOS token."""
    end_of_turn: str
    """The token the template writes right after an assistant message."""
    special: tuple[str, ...] = ()
    """Other special tokens of its vocabulary."""
    added: tuple[str, ...] = ()
    """Tokens of its vocabulary that are not marked special (Qwen3's ``<think>``)."""
    tokens: dict[str, str] = field(default_factory=dict)
    """``bos_token``, ``pad_token``, ... where the family has them."""


FAMILIES = {
    "gemma": Family(
        GEMMA,
        "<eos>",
        "<end_of_turn>",
        ("<start_of_turn>", "<end_of_turn>"),
        tokens={"bos_token": "<bos>", "pad_token": "<pad>"},
    ),
    "llama-3.0": Family(  # the first release's EOS, as meta-llama/Meta-Llama-3-8B had it
        LLAMA3,
        "<|end_of_text|>",
        "<|eot_id|>",
        ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
        tokens={"bos_token": "<|begin_of_text|>"},
    ),
    "llama-3.0-eot": Family(  # the same template after the EOS was changed to <|eot_id|>
        LLAMA3,
        "<|eot_id|>",
        "<|eot_id|>",
        ("<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>"),
        tokens={"bos_token": "<|begin_of_text|>"},
    ),
    "llama-3.1": Family(
        LLAMA31,
        "<|eot_id|>",
        "<|eot_id|>",
        ("<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>", "<|eom_id|>"),
        tokens={"bos_token": "<|begin_of_text|>"},
    ),
    "phi-3": Family(
        PHI3,
        "<|endoftext|>",
        "<|end|>",
        ("<|user|>", "<|assistant|>", "<|end|>"),
        tokens={"bos_token": "<s>"},
    ),
    "mistral": Family(MISTRAL, "</s>", "</s>", tokens={"bos_token": "<s>"}),
    "qwen2.5": Family(QWEN25, "<|im_end|>", "<|im_end|>", ("<|im_start|>",)),
    "qwen3": Family(
        QWEN3, "<|im_end|>", "<|im_end|>", ("<|im_start|>",), added=("<think>", "</think>")
    ),
    "smollm2": Family(SMOLLM2, "<|im_end|>", "<|im_end|>", ("<|im_start|>",)),
}
"""Chat families, by name."""

WORDS = ["What is 12 + 7?", "The answer is 19.", "Hi.", "Thanks.", "user", "assistant", "model"]


def family_tokenizer(name: str, template: str | None = None):
    """The test BPE tokenizer with family ``name``'s special tokens, EOS and chat template
    (or ``template``)."""
    from rlvr.models.tiny import build_tokenizer

    family = FAMILIES[name]
    tokenizer = build_tokenizer(WORDS * 20, vocab_size=300)
    tokenizer.add_special_tokens(
        {"eos_token": family.eos, "additional_special_tokens": list(family.special)} | family.tokens
    )
    tokenizer.add_tokens(list(family.added))
    tokenizer.chat_template = template or family.template
    return tokenizer
