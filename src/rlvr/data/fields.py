"""Field mappings (which column is the prompt, the answer, the tests) and named datasets.

A :class:`FieldMap` names, by dotted path into a row, where the prompt and the reference
live; :data:`FIELD_MAPS` holds the mappings of the datasets the seed papers use, so each
loads with a one-line config. Their field names come from the datasets' cards:

============  ==================================  =====  ==========================================
name          Hugging Face dataset                split  fields (prompt / answer / id)
============  ==================================  =====  ==========================================
dapo-math     BytedTsinghua-SIA/DAPO-Math-17k     train  prompt (chat messages) /
                                                         reward_model.ground_truth / extra_info.index
math500       HuggingFaceH4/MATH-500              test   problem / answer / unique_id
aime2024      HuggingFaceH4/aime_2024             train  problem / answer / id
aime2025      opencompass/AIME2025 (AIME2025-I    test   question / answer / --
              and AIME2025-II configs)
amc23         math-ai/amc23                       test   question / answer / id
humaneval     openai/openai_humaneval             test   prompt / the row (test, entry_point) /
                                                         task_id
mbpp          google-research-datasets/mbpp       test   text / the row (test_list,
              (full config)                              test_setup_code) / task_id
============  ==================================  =====  ==========================================

The code sets hand the ``code`` verifier the whole row, which it reads as it is (see
:mod:`rlvr.rewards.code`); an APPS or TACO row loads with ``FieldMap(prompt="question",
answer=None, tests="input_output", reference="tests")``.

:data:`DATASETS` binds those names to their hub location, so ``load_examples("math500")``
fetches MATH-500 (network or the local HF cache) and ``load_examples("my.parquet",
fields="math500")`` reads a local copy with the same mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MATH_TEMPLATE = (
    "{prompt}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
)
"""Prompt template for math sets whose problems carry no answer-format instruction."""


@dataclass(frozen=True)
class FieldMap:
    """Where a row keeps its prompt and reference (dotted paths: ``reward_model.ground_truth``)."""

    prompt: str = "prompt"
    """Field with the prompt: a string, or a list of ``{"role", "content"}`` chat messages."""
    answer: str | None = "answer"
    """Field with the reference answer (``None`` when the set has no answers; the ``prompt``
    field itself: the last, assistant, message of its chat messages)."""
    tests: str | None = None
    """Field with code tests (APPS/TACO ``input_output`` or a list of asserts)."""
    id: str | None = None
    """Field with a unique id (``None``: ``<dataset>-<row number>``)."""
    reference: Literal["answer", "tests", "row"] = "answer"
    """What the verifier receives: the answer, the tests, or the whole row (reasoning-gym)."""
    metadata: tuple[str, ...] = ()
    """Extra fields copied into ``Example.metadata`` (e.g. ``level``, ``subject``)."""
    final_marker: str | tuple[str, ...] | None = ("####", "The answer is:")
    """An answer text whose last line starts with this (one of these) is a worked solution
    ending in its final answer (GSM8K's ``#### 72``, MetaMathQA's ``The answer is: 72``): the
    reference is that answer (``None``: the text whole)."""

    def __post_init__(self) -> None:
        if self.reference not in ("answer", "tests", "row"):
            raise ValueError(
                f"reference must be 'answer', 'tests' or 'row', got {self.reference!r}"
            )
        if self.reference == "answer" and self.answer is None:
            raise ValueError("reference='answer' needs an answer field")
        if self.reference == "tests" and self.tests is None:
            raise ValueError("reference='tests' needs a tests field")


FIELD_MAPS: dict[str, FieldMap] = {
    "default": FieldMap(),
    "dapo-math": FieldMap(
        prompt="prompt", answer="reward_model.ground_truth", id="extra_info.index"
    ),
    "math500": FieldMap(
        prompt="problem", answer="answer", id="unique_id", metadata=("subject", "level")
    ),
    "aime2024": FieldMap(prompt="problem", answer="answer", id="id"),
    "aime2025": FieldMap(prompt="question", answer="answer"),
    "amc23": FieldMap(prompt="question", answer="answer", id="id"),
    "reasoning_gym": FieldMap(prompt="question", answer="answer", id="id", reference="row"),
    "humaneval": FieldMap(prompt="prompt", answer=None, id="task_id", reference="row"),
    "mbpp": FieldMap(prompt="text", answer=None, id="task_id", reference="row"),
    "code_tasks": FieldMap(
        prompt="question",
        answer=None,
        tests="tests",
        id="id",
        reference="tests",
        metadata=("family", "level", "key"),
    ),
}


def field_map(fields: FieldMap | str | None) -> FieldMap:
    """A :class:`FieldMap` from a mapping, a name in :data:`FIELD_MAPS`, or ``None`` (default)."""
    if fields is None:
        return FIELD_MAPS["default"]
    if isinstance(fields, FieldMap):
        return fields
    if fields not in FIELD_MAPS:
        raise ValueError(
            f"unknown field mapping {fields!r}; valid: {', '.join(sorted(FIELD_MAPS))}"
        )
    return FIELD_MAPS[fields]


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset on the Hugging Face Hub with the mapping and template it needs."""

    hub: str
    """Hub dataset name."""
    split: str
    """Split to load."""
    fields: str
    """Name of its mapping in :data:`FIELD_MAPS`."""
    configs: tuple[str | None, ...] = (None,)
    """Dataset configs to load and concatenate (AIME 2025 ships its two exams as two)."""
    template: str | None = None
    """Default prompt template (``{prompt}`` is replaced by the row's prompt)."""
    unique: bool = False
    """Drop rows whose prompt repeats an earlier one."""


DATASETS: dict[str, DatasetSpec] = {
    # DAPO's prompts already ask for "Answer: $Answer" on the last line; the hub copy
    # repeats its ~17.9k problems many times over, so repeats are dropped.
    "dapo-math": DatasetSpec("BytedTsinghua-SIA/DAPO-Math-17k", "train", "dapo-math", unique=True),
    "math500": DatasetSpec("HuggingFaceH4/MATH-500", "test", "math500", template=MATH_TEMPLATE),
    "aime2024": DatasetSpec("HuggingFaceH4/aime_2024", "train", "aime2024", template=MATH_TEMPLATE),
    "aime2025": DatasetSpec(
        "opencompass/AIME2025",
        "test",
        "aime2025",
        configs=("AIME2025-I", "AIME2025-II"),
        template=MATH_TEMPLATE,
    ),
    "amc23": DatasetSpec("math-ai/amc23", "test", "amc23", template=MATH_TEMPLATE),
    "humaneval": DatasetSpec("openai/openai_humaneval", "test", "humaneval"),
    "mbpp": DatasetSpec("google-research-datasets/mbpp", "test", "mbpp", configs=("full",)),
}
