"""Fixtures of the trainer tests: small prompt files and a config builder.

Until the layers the trainer drives are all importable, the missing ones are replaced
here (and only here) by minimal stand-ins with the same call signatures, so the loop
itself can be tested; each stand-in is used only when the real module is absent.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from dataclasses import dataclass

import pytest
import torch

# ------------------------------------------------------------------ stand-ins (tests only)


def _standin_ops() -> types.ModuleType:
    mod = types.ModuleType("rlvr.ops")

    @dataclass
    class TokenStats:
        logp: torch.Tensor
        entropy: torch.Tensor | None

    def sequence_token_stats(
        model,
        input_ids,
        attention_mask,
        num_response_tokens,
        *,
        temperature=1.0,
        chunk_size=1024,
        compute_entropy=False,
    ):
        positions = (attention_mask.cumsum(-1) - 1).clamp_min(0)
        logits = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
        ).logits
        logits = logits[:, -num_response_tokens - 1 : -1].float() / temperature
        logprobs = logits.log_softmax(-1)
        logp = logprobs.gather(-1, input_ids[:, -num_response_tokens:, None]).squeeze(-1)
        entropy = -(logprobs.exp() * logprobs).sum(-1) if compute_entropy else None
        return TokenStats(logp=logp, entropy=entropy)

    mod.TokenStats = TokenStats
    mod.sequence_token_stats = sequence_token_stats
    return mod


def _standin_data() -> types.ModuleType:
    mod = types.ModuleType("rlvr.data")

    @dataclass
    class Example:
        prompt: str
        answer: object

    def load_examples(source, *, prompt_field="prompt", answer_field="answer", limit=None):
        with open(source) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        rows = rows[:limit] if limit else rows
        return [Example(prompt=r[prompt_field], answer=r[answer_field]) for r in rows]

    def format_prompt(tokenizer, prompt, system_prompt=None):
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": prompt}
        ]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    mod.Example, mod.load_examples, mod.format_prompt = Example, load_examples, format_prompt
    return mod


_STANDINS = {"rlvr.ops": _standin_ops, "rlvr.data": _standin_data}


def _install_standins() -> None:
    for name, build in _STANDINS.items():
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            sys.modules[name] = build()


_install_standins()

# ------------------------------------------------------------------ fixtures

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
