"""Prompt sets: loading with field mappings, chat formatting, reasoning-gym generators.

::

    from rlvr.data import format_prompt, load_examples

    examples = load_examples("math500")                                  # hub, named mapping
    examples = load_examples("aime24.parquet", fields="aime2024")         # local copy
    examples = load_examples("train.jsonl", fields="reasoning_gym")       # `rlvr data gen` output
    text = format_prompt(tokenizer, examples[0].prompt, system_prompt=None)
"""

from rlvr.data.chat import format_prompt, has_chat_template, to_messages
from rlvr.data.fields import DATASETS, FIELD_MAPS, MATH_TEMPLATE, DatasetSpec, FieldMap, field_map
from rlvr.data.gym import gym_rows, questions_in, write_jsonl
from rlvr.data.loading import (
    Example,
    apply_template,
    check_source,
    load_examples,
    read_jsonl,
    read_parquet,
)

__all__ = [
    "DATASETS",
    "FIELD_MAPS",
    "MATH_TEMPLATE",
    "DatasetSpec",
    "Example",
    "FieldMap",
    "apply_template",
    "check_source",
    "field_map",
    "format_prompt",
    "gym_rows",
    "has_chat_template",
    "load_examples",
    "questions_in",
    "read_jsonl",
    "read_parquet",
    "to_messages",
    "write_jsonl",
]
