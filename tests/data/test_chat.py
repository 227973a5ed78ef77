"""Chat templates applied when the tokenizer has one."""

from __future__ import annotations

from rlvr.data import format_prompt, to_messages


def test_chat_template_with_generation_prompt(tiny_model):
    _, tokenizer = tiny_model
    assert format_prompt(tokenizer, "What is 2+2?") == (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_system_prompt_replaces_one_in_the_data(tiny_model):
    _, tokenizer = tiny_model
    messages = [{"role": "system", "content": "old"}, {"role": "user", "content": "Hi"}]
    assert format_prompt(tokenizer, messages, system_prompt="new") == (
        "<|im_start|>system\nnew<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_no_chat_template_joins_contents(tiny_model):
    _, tokenizer = tiny_model
    tokenizer.chat_template = None
    assert (
        format_prompt(tokenizer, "What is 2+2?", system_prompt="Be brief.")
        == "Be brief.\n\nWhat is 2+2?"
    )


def test_to_messages_keeps_multi_turn_prompts():
    turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert to_messages(turns) == turns
    assert to_messages(turns) is not turns
