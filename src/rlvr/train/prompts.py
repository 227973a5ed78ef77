"""Prompts and SFT pairs, tokenised once, and a resumable seeded sampler over them."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rlvr.atomic import atomic_path
from rlvr.data import (
    DATASETS,
    FieldMap,
    format_prompt,
    gym_rows,
    load_examples,
    questions_in,
    write_jsonl,
)
from rlvr.data.code_tasks import VERSION as CODE_TASKS_VERSION
from rlvr.data.code_tasks import check_code_family, check_code_tasks, code_task_rows, keys_in
from rlvr.data.gym import check_gym_config, check_gym_task
from rlvr.data.loading import (
    MissingField,
    MissingSplit,
    NoRows,
    check_hub_split,
    file_fields,
    is_local,
    source_splits,
)
from rlvr.generation.turns import end_of_turn
from rlvr.models import cache_root
from rlvr.train.config import DataConfig, SFTDataConfig


@dataclass(frozen=True)
class Prompt:
    """One training or evaluation prompt."""

    ids: tuple[int, ...]
    """Token ids of the formatted prompt (chat template applied)."""
    reference: Any
    """What the verifier checks completions against."""
    example: Any
    """The ``rlvr.data.Example`` it came from."""


@dataclass(frozen=True)
class PromptSet:
    """Tokenised prompts and how many over-long ones were skipped or truncated."""

    prompts: list[Prompt]
    """Usable prompts, in file order."""
    skipped: int
    """Prompts longer than ``max_prompt_tokens`` that were dropped."""
    truncated: int
    """Prompts longer than ``max_prompt_tokens`` that were cut to their last tokens."""


def build_prompt_set(rows: Sequence[Any], tokenizer, cfg: DataConfig, *, source: str) -> PromptSet:
    """Format and tokenise examples (``rlvr.data.Example``); over-long prompts are skipped or truncated, with a warning."""
    texts = [format_prompt(tokenizer, r.prompt, cfg.system_prompt) for r in rows]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    prompts, skipped, truncated = [], 0, 0
    limit = cfg.max_prompt_tokens
    for row, ids in zip(rows, encoded, strict=True):
        if len(ids) > limit:
            if cfg.long_prompts == "skip":
                skipped += 1
                continue
            ids, truncated = ids[-limit:], truncated + 1
        if ids:
            prompts.append(Prompt(ids=tuple(ids), reference=row.reference, example=row))
    if skipped or truncated:
        action = f"skipped {skipped}" if skipped else f"truncated {truncated}"
        warnings.warn(
            f"{source}: {action} prompt(s) longer than data.max_prompt_tokens={limit}", stacklevel=2
        )
    if not prompts:
        raise ValueError(
            f"{source}: no usable prompts (all {len(rows)} rows empty or longer than data.max_prompt_tokens={limit})"
        )
    return PromptSet(prompts=prompts, skipped=skipped, truncated=truncated)


GYM_PREFIX = "reasoning_gym:"
CODE_PREFIX = "code_tasks:"
GENERATED = {GYM_PREFIX: "reasoning_gym", CODE_PREFIX: "code_tasks"}
"""Prefixes of generated sources -> the field mapping their rows load with."""


def generated_prefix(source: str | None) -> str | None:
    """The prefix of a generated source (``reasoning_gym:``, ``code_tasks:``), else ``None``."""
    return next((p for p in GENERATED if source and source.startswith(p)), None)


def check_generated(key: str, source: str, config: dict[str, Any]) -> None:
    """Refuse, with one line and generating nothing, a generated ``source`` (given as ``key``)
    whose task or family is unknown, or whose options ``config`` (``data.gym.config``) its
    generator refuses: a field it has not, a value of the wrong type or out of range."""
    prefix = generated_prefix(source)
    assert prefix is not None
    task = source[len(prefix) :]
    name_check, config_check = (
        (check_code_family, check_code_tasks)
        if prefix == CODE_PREFIX
        else (check_gym_task, check_gym_config)
    )
    try:
        name_check(task)
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from None
    try:
        config_check(task, config)
    except ValueError as err:
        raise ValueError(f"data.gym.config: {err}") from None


def named_by_source(prompt_set: PromptSet, source: str | None) -> PromptSet:
    """``prompt_set`` with the problems of a generated ``source`` named by it
    (``reasoning_gym:chain_sum``), not by its cache file's stem
    (``chain_sum-n200-s3000000-6d5261daa4``), so a run's held-out reports and ``rlvr eval``'s
    of its checkpoints name them alike; any other set as it is."""
    if generated_prefix(source) is None:
        return prompt_set
    prompts = [replace(p, example=replace(p.example, dataset=source)) for p in prompt_set.prompts]
    return replace(prompt_set, prompts=prompts)


def gym_files(cfg: DataConfig) -> dict[str, Path]:
    """``{"train": path, "eval": path}`` of the generated sets (``reasoning_gym:<task>``, ``code_tasks:<family>``).

    The held-out set is generated first (seed ``data.gym.eval_seed``); the training set
    then skips every held-out question (for code tasks: every held-out problem, however
    worded). Files are cached under ``$RLVR_CACHE/data`` by task, size, seed, options
    and exclusions, each written once (atomically).
    """
    gym, out = cfg.gym, {}
    eval_prefix, train_prefix = generated_prefix(cfg.eval), generated_prefix(cfg.train)
    if eval_prefix is not None:
        out["eval"] = _gym_file(
            eval_prefix,
            cfg.eval[len(eval_prefix) :],
            gym.eval_size,
            gym.held_out_seed,
            gym.config,
            None,
        )
    if train_prefix is not None:
        exclude = out.get("eval") if eval_prefix == train_prefix else None
        out["train"] = _gym_file(
            train_prefix,
            cfg.train[len(train_prefix) :],
            gym.train_size,
            gym.seed,
            gym.config,
            exclude,
        )
    return out


def _gym_file(
    prefix: str, task: str, size: int, seed: int, config: dict, exclude: Path | None
) -> Path:
    """The cached JSONL of ``size`` problems of ``task``, none of whose questions is in ``exclude``."""
    parts = [task, size, seed, config, exclude.name if exclude else None]
    if prefix == CODE_PREFIX:  # a new generator version draws other tests from the same seed
        parts.append(CODE_TASKS_VERSION)
    key = json.dumps(parts, sort_keys=True)
    stem = task if prefix == GYM_PREFIX else f"{GENERATED[prefix]}-{task}"
    path = (
        _cache_dir() / f"{stem}-n{size}-s{seed}-{hashlib.sha1(key.encode()).hexdigest()[:10]}.jsonl"
    )
    if not path.exists():
        _write_atomic(path, prefix, task, size, seed, config, [exclude] if exclude else [])
    return path


def _cache_dir() -> Path:
    return cache_root() / "data"


def _write_atomic(
    path: Path, prefix: str, task: str, size: int, seed: int, config: dict, exclude: list[Path]
) -> None:
    if prefix == CODE_PREFIX:
        rows = code_task_rows(task, size=size, seed=seed, config=config, exclude=keys_in(exclude))
    else:
        rows = gym_rows(task, size=size, seed=seed, config=config, exclude=questions_in(exclude))
    with atomic_path(path) as tmp:
        write_jsonl(rows, tmp)


def warn_generated_held_out(cfg: DataConfig) -> bool:
    """Warn when the training data is yours but the held-out set is a generated one (the
    ``demo`` base's ``reasoning_gym:chain_sum``, kept by a config that set only
    ``data.train``): its ``eval/*`` scores measure that task, not yours."""
    other = generated_prefix(cfg.eval) is not None and generated_prefix(cfg.train) is None
    if other:
        warnings.warn(
            f"data.eval is the generated set {cfg.eval} while data.train is {cfg.train}: the "
            "held-out scores measure that task; set data.eval to your held-out data "
            "(or data.eval=null for none)",
            stacklevel=2,
        )
    return other


def train_fields(cfg: DataConfig) -> str | None:
    """The named mapping ``data.train`` loads with: ``data.fields``; with the default field
    keys, that of a local file's rows as ``rlvr data gen`` writes them (``reasoning_gym``,
    ``code_tasks``: :func:`~rlvr.data.loading.file_fields`); else ``None``."""
    if cfg.fields is not None:
        return cfg.fields
    default = FieldMap(prompt=cfg.prompt_field, answer=cfg.answer_field) == FieldMap()
    return file_fields(cfg.train) if default and cfg.train else None


def warn_task_verifier(cfg: DataConfig, verifier: str) -> bool:
    """Warn when the verifier scores one reasoning-gym task (the ``demo`` base's
    ``reasoning_gym:chain_sum``, kept by a config that set only the data) while the training
    data is yours: it reads answers as that task's, so a fraction or an expression scores wrong.
    A file of reasoning-gym rows (``rlvr data gen``, or ``data.fields=reasoning_gym``) is not."""
    yours = generated_prefix(cfg.train) is None and train_fields(cfg) != GENERATED[GYM_PREFIX]
    other = verifier.startswith(GYM_PREFIX) and yours
    if other:
        warnings.warn(
            f"reward.verifier is {verifier} while data.train is {cfg.train}: it scores answers "
            "as that task's (1/2 against \\frac{1}{2} scores wrong); for math answers set "
            "reward.verifier=math",
            stacklevel=2,
        )
    return other


def warn_few_prompts(count: int, prompts_per_step: int) -> bool:
    """Warn when the training set has fewer prompts than a step draws, so that every step
    samples the same prompts, several times over."""
    few = count < prompts_per_step
    if few:
        warnings.warn(
            f"data.train has {count} prompts, fewer than rollout.prompts_per_step="
            f"{prompts_per_step}: a step's {prompts_per_step} prompts are at most {count} "
            f"distinct ones, repeated (about {prompts_per_step / count:.2g} times each); add "
            f"prompts or set rollout.prompts_per_step={count} or less",
            stacklevel=2,
        )
    return few


def warn_shared_prompts(train_set: PromptSet, eval_set: PromptSet) -> int:
    """Warn when held-out prompts are also training prompts (same tokens); returns how many are."""
    trained = {p.ids for p in train_set.prompts}
    shared = sum(p.ids in trained for p in eval_set.prompts)
    if shared:
        warnings.warn(
            f"data.eval: {shared} of {len(eval_set.prompts)} held-out prompts are also training "
            "prompts (data.train); their eval/* scores are not held-out",
            stacklevel=2,
        )
    return shared


def load_prompt_set(tokenizer, cfg: DataConfig, *, role: str) -> PromptSet:
    """The ``train`` or ``eval`` prompts of ``cfg`` (file, dataset, ``reasoning_gym:<task>``, ``code_tasks:<family>``)."""
    source = cfg.train if role == "train" else cfg.eval
    limit = cfg.max_train_examples if role == "train" else cfg.max_eval_examples
    if source is None:
        raise ValueError(f"data.{role} is not set")
    cfg = cfg.held_out() if role == "eval" else cfg
    fields_name = cfg.fields
    prefix = generated_prefix(source)
    if prefix is not None:  # one generated file: data.split names the other source's split
        source, fields_name = str(gym_files(cfg)[role]), fields_name or GENERATED[prefix]
        cfg = replace(cfg, split=None, eval_split=None)
    rows = read_examples(cfg, source, limit=limit, fields=fields_name, role=role)
    return build_prompt_set(rows, tokenizer, cfg, source=source)


def _split(cfg: DataConfig | SFTDataConfig, source: str, role: str) -> str | None:
    """The split ``role``'s source is read with: ``data.split``, for ``eval`` ``data.eval_split``
    first; a local folder or hub dataset of several splits read as ``eval`` without one is
    refused, since its ``train`` split would be read as the held-out set."""
    split = cfg.split if role == "train" else cfg.eval_split or cfg.split
    splits = source_splits(source) if split is None and role == "eval" else []
    if len(splits) > 1:
        raise ValueError(
            f"data.eval: {source} holds the splits {', '.join(splits)}; name the held-out one "
            "with data.eval_split (its train split would be read otherwise)"
        )
    return split


def read_examples(
    cfg: DataConfig | SFTDataConfig,
    source: str,
    *,
    limit: int | None,
    fields: str | None = None,
    role: str = "train",
) -> list:
    """The rows of ``source`` as a run reads them as ``data.<role>``: with the named mapping
    ``fields``, else the config's field keys, which a missing field's error then names."""
    own = "eval_" if role == "eval" else ""  # data.eval's own keys
    if isinstance(cfg, SFTDataConfig):
        cfg = cfg.held_out() if role == "eval" else cfg
        # the response is trained on whole: a GSM8K solution keeps its steps and "#### 72"
        mapping = FieldMap(prompt=cfg.prompt_field, answer=cfg.response_field, final_marker=None)
        keys = f"data.{own}prompt_field / data.{own}response_field"
        options: dict[str, Any] = {"check": _text_response(cfg)}
    else:  # data.eval's own keys are applied by the caller (they pick ``fields`` too)
        mapping = FieldMap(prompt=cfg.prompt_field, answer=cfg.answer_field)
        keys = (
            f"data.{own}prompt_field / data.{own}answer_field (or a named mapping with "
            f"data.{own}fields)"
        )
        options = {"template": cfg.template}
    options["split"] = _split(cfg, source, role)
    try:
        return load_examples(source, fields=fields or mapping, limit=limit, **options)
    except ValueError as err:
        text = str(err)
        if isinstance(cfg, SFTDataConfig):  # the mapping's answer is SFT's response
            text = text.replace("(the answer field)", "(the response field)")
            text = text.replace("(the answer)", "(the response)")
            text = text.replace(
                "as the answer field too, to make that message the answer",
                "as data.response_field too, to train on that message",
            )
        if isinstance(err, MissingField) and not fields:
            raise MissingField(f"{text}; name the file's fields with {keys}") from None
        if isinstance(err, MissingSplit):
            key = "data.eval_split" if role == "eval" else "data.split"
            raise MissingSplit(f"{text}; name one with {key}") from None
        if isinstance(err, NoRows):
            raise NoRows(f"data.{role}: {text}") from None
        if text == str(err):
            raise
        raise (MissingField if isinstance(err, MissingField) else ValueError)(text) from None


def check_local_data(
    cfg: DataConfig | SFTDataConfig, *, produced: frozenset[str] = frozenset()
) -> dict[str, int]:
    """Read the local ``data.train`` / ``data.eval`` files as the run will, without a tokenizer:
    ``--dry-run`` finds a malformed row or a missing field before anything loads; of a named
    set or hub name, offline, a split its cached copy lacks (:func:`check_hub_split`).
    ``produced``: files an earlier pipeline stage will write (not read). Returns the rows
    read, by role (``train``, ``eval``; a role not read is left out)."""
    read = {}
    for role in ("train", "eval"):
        source = getattr(cfg, role)
        if not source or generated_prefix(source) or source in produced:
            continue
        if source in DATASETS or not is_local(source):  # its splits are known unread offline
            check_hub_split(source, _split(cfg, source, role))
            continue  # a named set or hub name (a folder named data/mine is read: it exists)
        if isinstance(cfg, SFTDataConfig):
            limit = cfg.max_examples if role == "train" else None
            read[role] = len(read_examples(cfg, source, limit=limit, role=role))
        else:
            limit = cfg.max_train_examples if role == "train" else cfg.max_eval_examples
            mapped = cfg.held_out() if role == "eval" else cfg
            rows = read_examples(mapped, source, limit=limit, fields=mapped.fields, role=role)
            read[role] = len(rows)
    return read


def train_rows(cfg: DataConfig, read: dict[str, int]) -> int | None:
    """How many training rows the run will read, known without loading anything: a generated
    set's ``data.gym.train_size`` (at most ``data.max_train_examples``), or the count ``read``
    from a local file by :func:`check_local_data`; ``None`` for a named or Hub set. The run's
    prompts are at most these (it also drops prompts over ``data.max_prompt_tokens``)."""
    if generated_prefix(cfg.train):
        return min(cfg.gym.train_size, cfg.max_train_examples or cfg.gym.train_size)
    return read.get("train")


@dataclass(frozen=True)
class SFTExample:
    """One supervised pair."""

    prompt_ids: tuple[int, ...]
    """Formatted prompt tokens (masked out of the loss)."""
    response_ids: tuple[int, ...]
    """Target tokens, ending with the end-of-turn token (:func:`load_sft_examples`)."""


class SFTExamples(NamedTuple):
    """Tokenised SFT pairs and how many rows were dropped."""

    examples: list[SFTExample]
    """Usable pairs, in file order."""
    skipped: int
    """Rows longer than ``max_tokens`` (prompt + response + end-of-turn token), with an empty
    prompt, or whose response holds the end-of-turn token (or EOS) before its end."""


def load_sft_examples(
    source: str, tokenizer, cfg: SFTDataConfig, *, limit: int | None, role: str = "train"
) -> SFTExamples:
    """Prompt/response pairs of ``data.<role>`` tokenised, each response ending with one
    end-of-turn token (the one the chat template writes after an assistant message:
    :func:`~rlvr.generation.turns.end_of_turn`, the EOS where that is unknown); rows over
    ``max_tokens`` (prompt + response + that token), and rows whose response holds that token
    or the EOS before its end (sampling would stop there), are skipped, counted and warned."""
    rows = read_examples(cfg, source, limit=limit, role=role)
    texts = [format_prompt(tokenizer, r.prompt, cfg.system_prompt) for r in rows]
    prompts = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    responses = (
        tokenizer([str(r.reference) for r in rows], add_special_tokens=False)["input_ids"]
        if rows
        else []
    )
    end = end_of_turn(tokenizer)
    if end is None:
        raise ValueError(
            "the tokenizer has no EOS token and its chat template no end-of-turn token; SFT "
            "targets could never end"
        )
    stops = {end, tokenizer.eos_token_id} - {None}
    out, over, empty, inner = [], [], 0, 0
    for p, r in zip(prompts, responses, strict=True):
        r = end_with_one(r, end, stops, tokenizer)
        if not p:
            empty += 1
        elif any(t in stops for t in r[:-1]):  # sampling would stop there; the rest unreachable
            inner += 1
        elif len(p) + len(r) > cfg.max_tokens:
            over.append(len(p) + len(r))
        else:
            out.append(SFTExample(prompt_ids=tuple(p), response_ids=tuple(r)))
    skipped = len(over) + empty + inner
    if skipped:
        named = [tokenizer.convert_ids_to_tokens(t) for t in sorted(stops)]
        why = _skipped_rows(role, source, len(rows), over, empty, cfg, (inner, named))
        warnings.warn(why, stacklevel=2)
    if not out:
        raise ValueError(f"{source}: no usable rows ({len(rows)} read, {skipped} skipped)")
    return SFTExamples(out, skipped)


def end_with_one(ids: Sequence[int], end: int, stops: set[int], tokenizer) -> list[int]:
    """Response tokens ``ids`` ending with one stop token: ``end`` (the end-of-turn token)
    appended, unless the text already ends with a token of ``stops`` (the end-of-turn token
    or the EOS: sampling stops on either), or with one and then only whitespace, which is
    dropped (the newline a chat template writes after ``<|im_end|>`` or ``<end_of_turn>``:
    generation stops at that token, so the model never produces it). A response's own
    trailing newline, with no stop token before it, is kept."""
    stop = len(ids)
    while stop and ids[stop - 1] not in stops and not tokenizer.decode([ids[stop - 1]]).strip():
        stop -= 1
    if stop and ids[stop - 1] in stops:
        return list(ids[:stop])
    return [*ids, end]


def _skipped_rows(
    role: str,
    source: str,
    read: int,
    over: list[int],
    empty: int,
    cfg: SFTDataConfig,
    inner: tuple[int, list[str]] = (0, []),
) -> str:
    """The warning of the rows :func:`load_sft_examples` skipped: how many of how many, the
    longest of those over ``data.max_tokens``, and (``inner``: a count and the tokens' names)
    those whose response holds a token that ends a turn before its end."""
    parts = []
    if over:
        parts.append(
            f"{len(over)} longer than data.max_tokens={cfg.max_tokens} (prompt + response + "
            f"end-of-turn token; the longest {max(over)} tokens)"
        )
    if empty:
        parts.append(f"{empty} with an empty prompt")
    if inner[0]:
        tokens = " or ".join(repr(t) for t in inner[1])
        parts.append(
            f"{inner[0]} whose response holds {tokens} before its end (sampling stops there, "
            "so what follows could never be generated)"
        )
    use = "trained on" if role == "train" else "in sft/eval_loss"
    return (
        f"data.{role}: {source}: skipped {len(over) + empty + inner[0]} of {read} rows, "
        f"{' and '.join(parts)}; they are not {use}"
    )


def warn_shared_pairs(train: Sequence[SFTExample], held_out: Sequence[SFTExample]) -> int:
    """Warn when held-out SFT pairs have a training prompt (same tokens); returns how many do."""
    prompts = {e.prompt_ids for e in train}
    pairs = {(e.prompt_ids, e.response_ids) for e in train}
    shared = sum(e.prompt_ids in prompts for e in held_out)
    if shared:
        same = sum((e.prompt_ids, e.response_ids) in pairs for e in held_out)
        warnings.warn(
            f"data.eval: {shared} of {len(held_out)} held-out pairs have a training prompt "
            f"(data.train; {same} the training response too): sft/eval_loss is not held-out "
            "on them",
            stacklevel=2,
        )
    return shared


def _text_response(cfg: SFTDataConfig):
    """A check that a row's response is text (a number is read as its digits; one assistant
    message was read as its text), not a list or mapping."""

    def check(example: Any) -> None:
        value = example.reference
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(
                f"field {cfg.response_field!r} (the response) must be text or one assistant "
                f"message, got {type(value).__name__}"
            )

    return check


class IndexSampler:
    """Endless stream of indices into ``range(size)``: epoch by epoch, each a seeded permutation.

    The order depends only on ``(seed, epoch)``, so the state is two integers and a resumed
    run draws the same indices as an uninterrupted one.
    """

    def __init__(self, size: int, *, seed: int, shuffle: bool = True) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size, self.seed, self.shuffle = size, seed, shuffle
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(self.size))
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.size, generator=gen).tolist()

    def take(self, k: int) -> list[int]:
        """The next ``k`` indices (wrapping into the next epoch)."""
        out = []
        while len(out) < k:
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            n = min(k - len(out), self.size - self.position)
            out.extend(self._order[self.position : self.position + n])
            self.position += n
        return out

    def take_within_epoch(self, k: int) -> list[int]:
        """The next ``k`` indices, fewer when the epoch ends first (never any of the next epoch)."""
        left = self.size - self.position or self.size  # an epoch just finished: the next one
        return self.take(min(k, left))

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "position"}``."""
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict`, or from an asynchronous run's: before the batches
        it had sampled ahead (``trained``), which are drawn again."""
        state = state.get("trained", state)
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation(self.epoch)
