"""Chat templates applied when the tokenizer has one."""

from __future__ import annotations

import pytest

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


def test_a_chat_template_that_raises_is_one_value_error(tiny_model):
    """A template's ``raise_exception`` (Gemma's "System role not supported") escaped as
    jinja2's TemplateError, a traceback in ``rlvr train`` and ``rlvr eval``."""
    _, tokenizer = tiny_model
    tokenizer.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{{ m['content'] }}{% endfor %}"
    )
    assert format_prompt(tokenizer, "Hi") == "Hi"
    with pytest.raises(
        ValueError,
        match=r"chat template refused a prompt with the roles system, user: System role not supported",
    ):
        format_prompt(tokenizer, "Hi", system_prompt="Be brief.")


def test_a_chat_template_that_fails_in_python_is_one_value_error(tiny_model):
    """A template whose own code fails (``{{ 1 / 0 }}``) was a ZeroDivisionError traceback
    through jinja out of rlvr train, rlvr eval and rlvr sft."""
    _, tokenizer = tiny_model
    tokenizer.chat_template = "{{ 1 / 0 }}"
    said = r"chat template failed on a prompt with the roles user: ZeroDivisionError: division"
    with pytest.raises(ValueError, match=said):
        format_prompt(tokenizer, "Hi")


def test_the_system_prompt_key_says_what_a_model_without_a_chat_template_gets(tiny_model):
    """data.system_prompt was documented as placed "when the tokenizer has a chat template";
    without one it is given too, as text before a blank line."""
    from rlvr.train.config import DataConfig, SFTDataConfig
    from rlvr.train.config_keys import field_docs

    _, tokenizer = tiny_model
    tokenizer.chat_template = None
    assert format_prompt(tokenizer, "Hi", system_prompt="Be brief.") == "Be brief.\n\nHi"
    for cls in (DataConfig, SFTDataConfig):
        assert field_docs(cls)["system_prompt"].endswith("without one its text and a blank line.")


def test_to_messages_keeps_multi_turn_prompts():
    turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    assert to_messages(turns) == turns
    assert to_messages(turns) is not turns


def _tokenizer_adding_bos(tiny_model):
    """The tiny tokenizer made to put ``<s>`` before every text, as Llama's does."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    core = tiny_model[1].backend_tokenizer
    core.add_special_tokens(["<s>"])
    bos = core.token_to_id("<s>")
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="<|im_end|>")


def test_no_chat_template_keeps_the_bos_the_tokenizer_adds(tiny_model):
    """Prompts are tokenised without special tokens, so a base model lost its BOS."""
    tokenizer = _tokenizer_adding_bos(tiny_model)
    text = format_prompt(tokenizer, "1 + 2", system_prompt="Be brief.")
    assert text == "<s>Be brief.\n\n1 + 2"
    assert (
        tokenizer(text, add_special_tokens=False)["input_ids"]
        == tokenizer("Be brief.\n\n1 + 2")["input_ids"]
    )
