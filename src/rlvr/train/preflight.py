"""What a run checks before anything loads."""

from __future__ import annotations

import importlib.util
import inspect
import warnings
from typing import Any

from rlvr.generation.registry import missing_package, sampler_entry
from rlvr.rewards import Verifier, get_verifier
from rlvr.rewards.registry import sandbox_isolation
from rlvr.train.config import LoraConfig, ModelConfig, RewardConfig, SFTConfig, TrainConfig


def preflight(
    config: TrainConfig | SFTConfig,
    *,
    device: bool = True,
    produced: frozenset[str] = frozenset(),
) -> None:
    """What can be checked before anything loads (a preset build can take minutes).

    A generated problem set given to SFT, missing local data files, a local model path that
    holds no model, a device this machine lacks, LoRA adapters without peft, a sampler whose
    package is not installed, or a code sandbox that cannot hide the caller's files (unless
    ``device`` is false: a dry run written for another machine) and an unknown verifier are
    reported first, each naming its key.
    ``produced``: data files an earlier pipeline stage will write (not checked for existence).
    """
    from rlvr.data import check_source
    from rlvr.train.prompts import check_generated, generated_prefix

    for key in ("train", "eval"):
        source = getattr(config.data, key, None)
        if not source:
            continue
        generated = generated_prefix(source) is not None
        if generated and isinstance(config, SFTConfig):
            raise ValueError(
                f"data.{key}: {source} is a generated problem set with no responses; SFT needs "
                "prompt/response pairs (e.g. worked solutions from rlvr.data.worked)"
            )
        if generated:
            check_generated(f"data.{key}", source, config.data.gym.config)
        elif source not in produced:
            try:
                check_source(source)
            except ValueError as err:
                raise ValueError(f"data.{key}: {err}") from None
    _check_model(config.model, device)
    rollout = getattr(config, "rollout", None)
    if device and rollout is not None and (missing := missing_package(rollout.sampler)):
        raise ValueError(f"rollout.sampler: {missing}")
    reward = getattr(config, "reward", None)
    if reward is not None:
        try:
            run_verifier(reward)
        except (TypeError, ValueError) as err:
            raise ValueError(f"reward.verifier: {err}") from None
        if device:  # this machine's sandbox: a dry run is written for another
            refuse_unconfined(sandbox_isolation(reward.verifier), reward.allow_unconfined)
    warn_inert_settings(config)
    if isinstance(config, TrainConfig) and (line := truncated_sampling_note(config)):
        warnings.warn(line, stacklevel=2)


def warn_inert_settings(config: TrainConfig | SFTConfig) -> list[str]:
    """Warn about keys set to what changes nothing in this run, because the switch they
    belong to is off: ``model.lora.targets`` or ``alpha`` with ``model.lora.rank=0`` (every
    weight trains, no adapters), ``rollout.generation_threads`` with ``rollout.staleness=0``
    (no generation worker), ``reward.overlong_penalty`` with ``reward.overlong_buffer=0`` and
    ``reward.overlong_buffer`` with ``reward.overlong_penalty=0`` (no overlong punishment), an
    off-policy objective updated on-policy (:func:`on_policy_note`). Returns the keys warned
    about."""
    inert = []
    for keys, line in _inert(config):
        inert += keys
        warnings.warn(line, stacklevel=2)
    return inert


def _inert(config: TrainConfig | SFTConfig) -> list[tuple[list[str], str]]:
    """The inert keys of ``config`` (:func:`warn_inert_settings`), each group with its warning."""
    lora, default = config.model.lora, LoraConfig()
    out = []
    changed = [k for k in ("targets", "alpha") if getattr(lora, k) != getattr(default, k)]
    if not lora.rank and changed:
        keys = [f"model.lora.{key}" for key in changed]
        out.append(
            (
                keys,
                f"{' and '.join(keys)} set, but model.lora.rank is 0: no adapters, "
                "every weight trains (model.lora.rank=16 trains adapters)",
            )
        )
    rollout = getattr(config, "rollout", None)
    if rollout is not None and rollout.generation_threads and not rollout.staleness:
        out.append(
            (
                ["rollout.generation_threads"],
                "rollout.generation_threads set, but "
                "rollout.staleness is 0: there is no generation worker; the run samples "
                "and updates in one process",
            )
        )
    reward = getattr(config, "reward", None)
    if reward is not None and not reward.overlong_buffer and reward.overlong_penalty != 1.0:
        out.append(
            (
                ["reward.overlong_penalty"],
                "reward.overlong_penalty set, but "
                "reward.overlong_buffer is 0: no completion is punished for its length "
                "(reward.overlong_buffer=16 punishes the last 16 tokens)",
            )
        )
    if reward is not None and reward.overlong_buffer and not reward.overlong_penalty:
        out.append(
            (
                ["reward.overlong_buffer"],
                "reward.overlong_buffer set, but "
                "reward.overlong_penalty is 0: no completion is punished for its length "
                "(reward.overlong_penalty=1 is DAPO's)",
            )
        )
    if isinstance(config, TrainConfig) and (line := on_policy_note(config)):
        out.append((["objective.name"], line))
    return out


def on_policy_note(config: TrainConfig) -> str | None:
    """The warning for an objective other than ``grpo`` whose every update is on-policy (one
    mini-batch, one epoch, no staleness): every ratio is exactly 1, so it updates as ``grpo``
    (:meth:`~rlvr.objectives.ObjectiveConfig.at_ratio_one`); None otherwise."""
    rollout = config.rollout
    effect = config.objective.at_ratio_one()
    if effect is None or rollout.reuses_rollout or rollout.staleness:
        return None
    return (
        f"objective.name={config.objective.name} with every update on-policy "
        "(rollout.minibatches=1, rollout.epochs=1, rollout.staleness=0): the ratio is exactly "
        f"1, so {effect}; for the objective to act, update several times per rollout batch "
        "(rollout.minibatches > 1, as the demo's 4, or rollout.epochs > 1) or sample ahead "
        "(rollout.staleness >= 1)"
    )


def truncated_sampling_note(config: TrainConfig) -> str | None:
    """The warning for rollouts sampled with ``rollout.top_p < 1`` or ``rollout.top_k > 0``:
    the update's log-probs (behaviour, current and reference) and ``policy/entropy`` are those
    of the whole ``softmax(logits / temperature)``, not of the truncated distribution the
    tokens were drawn from; with a sampler that reports log-probs (``vllm``), its
    ``rollout/logp_diff_*`` measure that truncation too. None when nothing truncates."""
    rollout = config.rollout
    keys = rollout.truncating_keys
    if not keys:
        return None
    line = (
        f"{' and '.join(keys)}: rollouts are drawn from the truncated distribution, but the "
        "update's log-probs and policy/entropy are those of the whole softmax(logits / "
        "rollout.temperature), as in verl and TRL: the behaviour log-prob of each token is "
        "below its sampling log-prob by the log of the mass kept, so the update is not exactly "
        "on-policy"
    )
    if sampler_entry(rollout.sampler).logprobs:
        line += (
            f"; rollout.sampler={rollout.sampler} reports the truncated distribution's "
            "log-probs, so rollout/logp_diff_mean and rollout/logp_diff_max include that gap "
            "as well as the engine's mismatch"
        )
    return line + " (docs/training.md, 'What the update's log-probs are of')"


def verifier_options(reward: RewardConfig) -> dict[str, Any]:
    """The options a run's verifier is built with, as its evaluation reports record them
    (``verifier_options``): ``reward.correct``, ``reward.wrong`` and ``reward.options``."""
    return {"correct": reward.correct, "wrong": reward.wrong, **reward.options}


def run_verifier(reward: RewardConfig) -> Verifier:
    """The run's verifier: ``reward.correct`` and ``reward.wrong`` go to its ``correct`` and
    ``wrong`` options. A plain ``(completion, reference) -> score`` function, which takes
    neither, scores on its own scale: it runs with the defaults 1.0 and 0.0, and other values
    are an error naming the keys."""
    try:
        return get_verifier(
            reward.verifier, correct=reward.correct, wrong=reward.wrong, **reward.options
        )
    except ValueError as err:
        refused = err
    plain = get_verifier(reward.verifier, **reward.options)  # its error names only yours
    inner = plain
    while isinstance(inner.options.get("inner"), Verifier):  # a +format wrapper's verifier
        inner = inner.options["inner"]
    if {"correct", "wrong"} & set(inspect.signature(inner.fn).parameters):
        raise refused
    if (reward.correct, reward.wrong) != (plain.correct_value, plain.failure_value):
        raise ValueError(
            f"{reward.verifier!r} takes no options correct and wrong, so reward.correct="
            f"{reward.correct} and reward.wrong={reward.wrong} cannot apply: leave them at "
            f"{plain.correct_value} and {plain.failure_value}, or give the function keyword "
            "options correct and wrong"
        )
    return plain


def _check_model(model: ModelConfig, device: bool) -> None:
    """The model's directory; with ``device``, this machine's device and peft for adapters."""
    from rlvr.models import check_model_dir, torch_device

    try:
        if device:
            torch_device(model.device)
    except ValueError as err:
        raise ValueError(f"model.device: {err}") from None
    try:
        check_model_dir(model.name)
    except ValueError as err:
        raise ValueError(f"model.name: {err}") from None
    if device and model.lora.rank and importlib.util.find_spec("peft") is None:
        from rlvr.train.lora import PEFT_MISSING

        raise ValueError(PEFT_MISSING)


UNCONFINED = ("fallback-uid", "fallback-minimal")
"""Sandbox modes whose programs can read files outside their box: world-readable ones
(``fallback-uid``, a dataset's file or the run's ``samples.jsonl``) or all of the caller's."""


def refuse_unconfined(mode: str | None, allowed: bool) -> None:
    """Refuse to train where programs can read the references from files (:data:`UNCONFINED`,
    docs/sandbox.md), unless ``reward.allow_unconfined`` says to."""
    if mode in UNCONFINED and not allowed:
        raise ValueError(
            f"the code sandbox here cannot hide your files from the programs ({mode}), "
            "so a policy could be paid for reading the answers: install bubblewrap or run on a "
            "kernel with Landlock (docs/sandbox.md), or set reward.allow_unconfined=true"
        )
