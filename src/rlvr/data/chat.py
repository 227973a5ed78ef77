"""Turning an example's prompt into the exact text the model is given.

:func:`format_prompt` applies the tokenizer's chat template when it has one (with the
generation prompt appended, so the model starts the assistant turn); a tokenizer without
one (a base model) gets the message contents joined by blank lines, after the BOS token
when the tokenizer puts one before every text it encodes (Llama, Mistral, Gemma base
models). Prompts are then tokenised with ``add_special_tokens=False`` everywhere (SFT, RL,
evaluation), so the returned text is exactly what the model sees; a chat template writes
its own BOS.
"""

from __future__ import annotations

from rlvr.data.loading import Messages


def to_messages(prompt: str | Messages, system_prompt: str | None = None) -> Messages:
    """Chat messages for ``prompt``; ``system_prompt`` replaces any system message in it.

    >>> to_messages("2+2?", system_prompt="Be brief.")
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': '2+2?'}]
    """
    messages = (
        [{"role": "user", "content": prompt}]
        if isinstance(prompt, str)
        else [dict(m) for m in prompt]
    )
    if system_prompt is not None:
        messages = [{"role": "system", "content": system_prompt}] + [
            m for m in messages if m["role"] != "system"
        ]
    return messages


def has_chat_template(tokenizer) -> bool:
    """True when the tokenizer carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def format_prompt(tokenizer, prompt: str | Messages, system_prompt: str | None = None) -> str:
    """The prompt string to generate from: chat template applied when the tokenizer has one."""
    messages = to_messages(prompt, system_prompt)
    if not has_chat_template(tokenizer):
        return bos_prefix(tokenizer) + "\n\n".join(m["content"] for m in messages)
    from jinja2 import TemplateError

    roles = ", ".join(m["role"] for m in messages)
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except TemplateError as err:  # raise_exception(...) in the template: Gemma, older Mistral
        raise ValueError(
            f"the tokenizer's chat template refused a prompt with the roles {roles}: {err} "
            "(templates that take no system message refuse data.system_prompt, --system-prompt "
            "and system messages in the data; some want user and assistant to alternate)"
        ) from None
    except Exception as err:  # noqa: BLE001 - a template is code of its own: {{ 1 / 0 }}
        raise ValueError(
            f"the tokenizer's chat template failed on a prompt with the roles {roles}: "
            f"{type(err).__name__}: {err}"
        ) from None
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
    return text


def bos_prefix(tokenizer) -> str:
    """The BOS token's text when encoding a text puts it first (``""`` otherwise)."""
    bos = getattr(tokenizer, "bos_token_id", None)
    with_special = tokenizer("a")["input_ids"]
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    adds_bos = bos is not None and len(with_special) > len(bare) and with_special[0] == bos
    return tokenizer.bos_token if adds_bos else ""
