"""A pipeline run's overrides (the command line's) by stage: ``key=value`` for every SFT and
RL stage, ``NAME:key=value`` for stage NAME; a model given for the first stage only."""

from __future__ import annotations

from collections.abc import Sequence

MODEL_KEYS = ("model", "model.name")
"""Override keys that name a stage's model."""


def _first_model(
    model: str | None, overrides: Sequence[str], names: list[str]
) -> tuple[str | None, list[str]]:
    """The first stage's model and the other overrides: ``model=`` / ``model.name=`` on the
    command line (for every stage, or ``FIRST:model=``) replaces the file's ``model``; a later
    stage starts from the previous stage's final model, so a model given to it is refused.
    An override that is not ``key=value`` or ``NAME:key=value`` is refused."""
    _check_syntax(overrides)
    rest = []
    for item in overrides:
        key, _, value = item.partition("=")
        stage, colon, name = key.partition(":")
        stage, name = (stage, name) if colon else (names[0], key)
        if not _names_model(name, value) or stage not in names:
            rest.append(item)  # an unknown stage is named by _split_overrides; model={...} kept
        elif stage != names[0]:
            raise ValueError(
                f"override {item!r}: stage {stage!r} starts from the model the stages before it "
                f"pass on; give the first stage's model instead (model=... or "
                f"{names[0]}:model=...)"
            )
        else:
            model = value
    return model, rest


def _check_syntax(overrides: Sequence[str]) -> None:
    """Refuse a command-line override without ``=`` or without a key (``foo``, ``sft:steps``,
    ``=3``): a data stage would read it as an empty option, the others name no key."""
    for item in overrides:
        key, equals, _ = item.partition("=")
        _, colon, name = key.partition(":")
        if not equals or not (name if colon else key).strip():
            raise ValueError(
                f"override {item!r}: expected key=value (every SFT and RL stage) or NAME:key=value "
                "(stage NAME)"
            )


def _names_model(key: str, value: str) -> bool:
    """Whether ``key=value`` names a stage's model (``model=`` / ``model.name=``; a whole
    ``model={...}`` section is not a model name and passes through)."""
    return key.strip() in MODEL_KEYS and not value.lstrip().startswith("{")


def _split_overrides(
    overrides: Sequence[str], names: list[str], skip: set[str] = frozenset()
) -> dict[str, list[str]]:
    """``key=value`` for every stage but those in ``skip`` (data stages), ``NAME:key=value``
    for stage NAME; one for every stage where every stage is in ``skip`` is refused."""
    out: dict[str, list[str]] = {n: [] for n in names}
    every = [n for n in names if n not in skip]
    for item in overrides:
        key = item.partition("=")[0]
        stage, colon, rest = key.partition(":")
        if not colon and not every:
            raise ValueError(
                f"override {item!r}: reaches no stage (key=value is for every SFT and RL "
                f"stage; give a data stage's option as NAME:key=value: {', '.join(names)})"
            )
        if not colon:
            for name in every:
                out[name].append(item)
            continue
        if stage not in out:
            raise ValueError(f"override {item!r}: no stage {stage!r}; stages: {', '.join(names)}")
        out[stage].append(item[len(stage) + 1 :])
    return out
