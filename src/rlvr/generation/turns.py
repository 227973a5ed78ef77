"""The token that ends an assistant turn, read from the tokenizer's chat template.

Chat models end a turn with a token of their own, not always the tokenizer's EOS: Gemma
writes ``<end_of_turn>`` (EOS ``<eos>``), Llama 3 ``<|eot_id|>`` (the 3.0 release's EOS is
``<|end_of_text|>``), Phi-3 ``<|end|>`` (EOS ``<|endoftext|>``); Qwen, SmolLM2 and the
``tiny`` preset end it with their EOS, ``<|im_end|>``. :func:`end_of_turn` renders a
conversation with the template and reads the token written right after the assistant's
message, so SFT teaches the token the model ends its turns with at inference, and sampling
stops on it (:func:`rlvr.generation.base.eos_ids`).
"""

from __future__ import annotations

import warnings
import weakref

PROBE = "rlvr-end-of-turn-probe"
"""The assistant message :func:`end_of_turn` renders (found again in the template's text)."""
PROBE_MESSAGES = [
    {"role": "user", "content": "Hi."},
    {"role": "assistant", "content": PROBE},
    {"role": "user", "content": "Thanks."},
]
"""A user turn, an assistant turn and the next user turn: what a template writes between the
assistant's message and the next turn is what the model writes to end its turn (a template
that writes nothing after a conversation's final assistant message still ends this one)."""


_WARNED: weakref.WeakSet = weakref.WeakSet()
"""Tokenizers whose unknown end of turn was warned about (once each: ``rlvr sft`` reads it for
``data.train`` and again for ``data.eval``)."""


def end_of_turn(tokenizer) -> int | None:
    """The id of the token the chat template ends an assistant turn with: the first token it
    writes after the assistant's message, whitespace aside, when that is a token the
    tokenizer holds whole (special or added: ``<end_of_turn>``, ``<|eot_id|>``, ``</s>``).

    Else the tokenizer's EOS id (``None`` if it has none): with no chat template (a base model,
    prompted with plain text) silently; when the template refuses the conversation or writes
    no such token after the message, with a one-line warning saying so (once per tokenizer).
    """
    eos = tokenizer.eos_token_id
    if not getattr(tokenizer, "chat_template", None):
        return eos
    found, why = template_end_of_turn(tokenizer)
    if found is not None:
        return found
    taken = (
        f"the EOS token {tokenizer.eos_token!r} is taken as its end (SFT targets end with it; "
        "sampling stops on it)"
        if eos is not None
        else "no token is taken as its end: the tokenizer has no EOS token either"
    )
    if tokenizer not in _WARNED:
        _WARNED.add(tokenizer)
        warnings.warn(
            f"the chat template's end of an assistant turn is unknown ({why}): {taken}",
            stacklevel=2,
        )
    return eos


def template_end_of_turn(tokenizer) -> tuple[int | None, str]:
    """``(id, "")`` of the token the chat template writes right after an assistant message
    (see :func:`end_of_turn`), or ``(None, why)`` when there is none."""
    try:
        text = tokenizer.apply_chat_template(PROBE_MESSAGES, tokenize=False)
    except Exception as err:  # noqa: BLE001 - a template is code of its own: any error is a refusal
        return None, f"it refused a user/assistant/user conversation: {type(err).__name__}: {err}"
    at = text.find(PROBE) if isinstance(text, str) else -1
    if at < 0:
        return None, "it leaves the assistant's message out of a user/assistant/user conversation"
    after = text[at + len(PROBE) :]
    whole = set(tokenizer.added_tokens_decoder) | set(tokenizer.all_special_ids)
    for token in tokenizer(after, add_special_tokens=False)["input_ids"]:
        if token in whole:
            return token, ""
        if tokenizer.decode([token]).strip():
            break
    return None, f"it writes {after[:24]!r} after an assistant message, no special token first"
