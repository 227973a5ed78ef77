"""What ``--dry-run`` checks and says of a run configuration past
:func:`~rlvr.train.preflight.preflight`: one function for ``rlvr train`` / ``rlvr sft`` and
for each model stage of ``rlvr pipeline``, so that both dry runs say the same."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any


def dry_run_checks(
    config: Any,
    note: Callable[[str], None],
    *,
    produced: frozenset[str] = frozenset(),
    own_model: bool = True,
) -> None:
    """Check a run configuration (``TrainConfig`` / ``SFTConfig``, already preflighted) as a
    dry run does: its local data files read as the run reads them, ``model.lora`` on the
    model's layers read without its weights, and the warnings the run gives on its data and
    verifier (:func:`warn_as_run`). ``note`` is given one line for each thing the dry run does
    not check: the layers of a preset not built yet or of a Hub model not read, a device, a
    sampler's package or peft for ``model.lora`` this machine lacks (the dry run may be for
    another), each data set and model the run fetches from the Hub.

    ``produced``: data files an earlier pipeline stage writes (not read). ``own_model`` false:
    ``model.name`` stands for a model an earlier pipeline stage makes, which has its layers:
    ``model.lora`` is checked on them, but the run does not fetch that model (no Hub note).
    """
    from rlvr.models import preset_needs
    from rlvr.train.lora import PEFT_MISSING, check_adapters
    from rlvr.train.prompts import check_local_data

    read = check_local_data(config.data, produced=produced)
    if unchecked := check_adapters(config.model):
        note(unchecked)
    warn_as_run(config, read)
    if line := device_note(config.model.device):
        note(line)
    if own_model and (needs := preset_needs(config.model.name)):
        note(f"model.name: {needs} (a run here would stop)")
    if config.model.lora.rank and importlib.util.find_spec("peft") is None:
        note(f"{PEFT_MISSING} (a run here would stop)")
    rollout = getattr(config, "rollout", None)
    if rollout is not None and (line := sampler_note(rollout.sampler, "rollout.sampler")):
        note(line)
    for line in hub_notes(config, model=own_model):
        note(line)


def warn_as_run(config: Any, read: dict[str, int]) -> None:
    """The warnings an RL run gives on its configuration's data and verifier (a held-out set or
    a verifier of the ``demo`` base's task beside your data), which need no data loaded, and
    on a training set with fewer prompts than a step draws, when its rows are counted without
    loading (``read``: the rows :func:`~rlvr.train.prompts.check_local_data` read); none for
    an SFT configuration."""
    from rlvr.train.prompts import (
        train_rows,
        warn_few_prompts,
        warn_generated_held_out,
        warn_task_verifier,
    )

    reward = getattr(config, "reward", None)  # rlvr sft has none
    if reward is None:
        return
    warn_task_verifier(config.data, reward.verifier)
    rows = train_rows(config.data, read)
    if rows is not None:  # the run's prompts are at most these rows
        warn_few_prompts(rows, config.rollout.prompts_per_step)
    if config.data.eval:
        warn_generated_held_out(config.data)


def hub_notes(config: Any, *, model: bool = True) -> list[str]:
    """A line for each data set (and, with ``model``, the model) the run fetches from the Hub,
    which a dry run does not read (:func:`hub_note`)."""
    from rlvr.data.loading import is_local
    from rlvr.models import preset_names
    from rlvr.train.prompts import generated_prefix

    def fetched(source: str) -> bool:
        return not is_local(source) and generated_prefix(source) is None

    named = [("data.train", config.data.train), ("data.eval", config.data.eval)]
    named = [(key, source, False) for key, source in named if source and fetched(source)]
    if model and config.model.name not in preset_names() and fetched(config.model.name):
        named.append(("model.name", config.model.name, True))
    return [f"{key}: {source}: not read ({hub_note(source, model=m)})" for key, source, m in named]


def hub_note(source: str, *, model: bool, by: str = "the run") -> str:
    """Why a dry run leaves the data set (``model``: the model) ``source`` unread: ``by`` fetches
    it from the Hub, or with ``HF_HUB_OFFLINE`` set, reads the Hugging Face cache's copy, or
    would stop for want of one."""
    from huggingface_hub import constants

    from rlvr.data.loading import hub_cached as dataset_cached
    from rlvr.models import hub_cached as model_cached

    if not constants.HF_HUB_OFFLINE:
        return f"fetched by {by}"
    if (model_cached if model else dataset_cached)(source):
        return f"HF_HUB_OFFLINE is set: {by} reads the cached copy"
    return f"HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: {by} here would stop"


def device_note(name: str, key: str = "model.device") -> str | None:
    """The dry run's line when the device ``name`` (given as ``key``) is missing on this
    machine, not an error: the dry run may be for another; ``None`` when it is here."""
    from rlvr.models import torch_device

    try:
        torch_device(name)
    except ValueError as err:
        return f"{key}: {err} (a run here would stop)"
    return None


def sampler_note(name: str, key: str) -> str | None:
    """The dry run's line when sampler ``name`` (given as ``key``) needs a package this
    machine lacks, not an error: the dry run may be for another; ``None`` when it has it."""
    from rlvr.generation.registry import missing_package

    missing = missing_package(name)
    return None if missing is None else f"{key}: {missing} (a run here would stop)"
