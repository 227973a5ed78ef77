"""``keys_help``: the key list ``rlvr train --help`` and ``rlvr sft --help`` print."""

from __future__ import annotations

import re

from rlvr.train.config import TrainConfig
from rlvr.train.config_keys import config_keys, keys_help
from rlvr.train.overrides import load_config


def _words(text: str) -> str:
    """``text`` with its whitespace as one space (a line broken after a hyphen joined back)."""
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", text).replace("``", "")
    return " ".join(text.split()).replace("- ", "-")


def test_every_description_is_printed_whole_also_under_a_long_value():
    """A key=value of 40 characters or more (the demo's data.gym.config, reward.verifier) gets
    a line of its own; its text was wrapped to the width left beside it, so its first line held
    one character ("T", then "ask options: ...")."""
    cfg = load_config(TrainConfig, "demo", [])
    lines = keys_help(TrainConfig, config=cfg, source="--config demo").splitlines()
    for key in config_keys(TrainConfig, defaults=cfg):
        head = f"  {key.key}={key.default}"
        at = lines.index(
            head if len(head) >= 40 else next(x for x in lines if x.startswith(head + " "))
        )
        text = [lines[at][41:]] if len(head) < 40 else []
        for line in lines[at + 1 :]:
            if not line.startswith(" " * 41):
                break
            text.append(line)
        assert _words(" ".join(text)) == _words(key.doc), key.key
