"""docs/training.md's reference lists every configuration key with its current default and docstring."""

import dataclasses
import json
from pathlib import Path

from rlvr.train import config as C
from rlvr.train.config_keys import field_docs

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "training.md").read_text()
SECTIONS = [
    (C.TrainConfig, ""),
    (C.ModelConfig, "model."),
    (C.LoraConfig, "model.lora."),
    (C.DataConfig, "data."),
    (C.GymConfig, "data.gym."),
    (C.RewardConfig, "reward."),
    (C.RolloutConfig, "rollout."),
    (C.ObjectiveConfig, "objective."),
    (C.OptimConfig, "optim."),
    (C.LogConfig, "log."),
    (C.EvalConfig, "eval."),
    (C.CheckpointConfig, "checkpoint."),
    (C.SFTConfig, "(sft) "),
    (C.SFTDataConfig, "(sft) data."),
    (C.SFTEvalConfig, "(sft) eval."),
]


def _field_docs() -> dict[str, dict[str, str]]:
    """Class name -> field -> its one-line docstring, read from the source."""
    return {cls.__name__: field_docs(cls) for cls, _ in SECTIONS}


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return _section_default(value)
    else:
        return "required"
    value = list(value) if isinstance(value, tuple) else value
    return "`" + (value if isinstance(value, str) else json.dumps(value)) + "`"


def _section_default(value) -> str:
    """``(section)``, naming the fields whose default here differs from the section class's own."""
    own = type(value)()
    changed = [
        f"`{f.name}={_plain(getattr(value, f.name))}`"
        for f in dataclasses.fields(value)
        if getattr(value, f.name) != getattr(own, f.name)
    ]
    return f"(section: {', '.join(changed)})" if changed else "(section)"


def _plain(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def test_every_field_has_a_one_line_docstring():
    docs = _field_docs()
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls, _ in SECTIONS
        for f in dataclasses.fields(cls)
        if "\n" in docs[cls.__name__].get(f.name, "\n")
    ]
    assert missing == []


def test_the_reference_rows_match_the_code():
    docs = _field_docs()
    rows = [
        f"| `{prefix}{f.name}` | {_default(f)} | {docs[cls.__name__][f.name].replace('``', '`')} |"
        for cls, prefix in SECTIONS
        for f in dataclasses.fields(cls)
    ]
    stale = [row for row in rows if row not in DOC]
    assert stale == [], "regenerate the reference: python tests/train/test_docs.py"


def reference_tables() -> str:
    """The configuration reference as docs/training.md holds it (``python tests/train/test_docs.py``)."""
    docs, out = _field_docs(), []
    for cls, prefix in SECTIONS:
        title = f"`{cls.__name__}`" + (f" (`{prefix.strip()}`)" if prefix else "")
        out += [
            f"\n### {title}: {cls.__doc__}\n",
            "| key | default | meaning |",
            "| --- | --- | --- |",
        ]
        out += [
            f"| `{prefix}{f.name}` | {_default(f)} | {docs[cls.__name__][f.name].replace('``', '`')} |"
            for f in dataclasses.fields(cls)
        ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference_tables(), end="")
