"""One step's rollout: sample G completions per prompt, score them, build the update batch.

Order of operations (each line a function below):

1. ``sample_round``: draw ``prompts_per_step`` prompts, generate G completions each with
   the run's sampler (``rollout.sampler``, after pushing the policy's weights to it), and
   score them with the verifier; when ``rollout.generation_batch_size`` splits the round
   into chunks, chunk i is scored (in the verifier's worker processes) while chunk i + 1
   is generated.
2. Dynamic sampling (DAPO): keep only groups whose verifier scores differ and draw further
   rounds until ``prompts_per_step`` groups are kept or ``max_sampling_rounds`` is hit.
3. ``assemble``: advantages over the whole, unfiltered batch (never from part of a group)
   from the shaped rewards (the verifier's scores plus DAPO's soft overlong punishment,
   :mod:`rlvr.train.overlong`), group statistics from the verifier's scores; then Klear's
   zero-advantage group filter and DAPO's truncated-completion mask drop rows.
4. ``behaviour_logp``: old log-probs only when the batch feeds more than one optimiser
   step, reference log-probs only when ``kl_coef > 0``.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from rlvr.advantages import compute_advantages, zero_advantage_groups
from rlvr.generation import Sampler
from rlvr.rewards import Scorer, Scores
from rlvr.train.batch import (
    RolloutBatch,
    SequenceBatch,
    concat,
    from_generation,
    micro_batches,
    pad_logp,
)
from rlvr.train.config import RewardConfig, TrainConfig
from rlvr.train.logprobs import forward_context, response_stats
from rlvr.train.lora import adapters_off
from rlvr.train.overlong import overlong_penalty
from rlvr.train.prompts import IndexSampler, Prompt


@dataclass
class Round:
    """One generation round: ``n`` groups of G completions, groups contiguous."""

    prompts: list[Prompt]
    """The n prompts, one per group."""
    seqs: SequenceBatch
    """[n * G] sampled sequences."""
    texts: list[str]
    """n * G decoded completions."""
    rewards: torch.Tensor
    """[n * G] the verifier's scores (without the overlong penalty, :meth:`shaped`)."""
    truncated: torch.Tensor
    """[n * G] bool: hit ``max_new_tokens`` without EOS."""
    verifier: dict[str, float] = field(default_factory=dict)
    """Verifier counts (``verifier/failures``, ``verifier/timeouts``, events; ``Scores.metrics``)."""
    verifier_error: str | None = None
    """The round's first verifier error or timeout message (``None``: none)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """``generate`` wall time, and ``score``: the rest of the round (scoring not hidden behind generation)."""
    rollout_logp: torch.Tensor | None = None
    """[n * G, T] the sampler's log-probs of the sampled tokens (``None``: it reports none)."""
    behaviour_logp: torch.Tensor | None = None
    """[n * G, T] the trainer's log-probs of the sampled tokens under the weights that sampled
    them, set by the generation worker of ``rollout.staleness >= 1`` (``None``: synchronous)."""

    def informative(self, group_size: int) -> torch.Tensor:
        """[n] bool: groups whose verifier scores are not all equal (DAPO eq. 11 on accuracy)."""
        return _differ(self.rewards, group_size)

    @property
    def lengths(self) -> torch.Tensor:
        """[n * G] tokens of each completion, EOS included."""
        return self.seqs.response_mask.sum(1)

    def penalties(self, cfg: TrainConfig) -> torch.Tensor:
        """[n * G] DAPO's soft overlong punishment of each completion (0 when off)."""
        cap, reward = cfg.rollout.max_new_tokens, cfg.reward
        return overlong_penalty(self.lengths, cap, reward.overlong_buffer, reward.overlong_penalty)

    def shaped(self, cfg: TrainConfig) -> torch.Tensor:
        """[n * G] the rewards the update learns from: verifier score plus overlong penalty."""
        return self.rewards + self.penalties(cfg)

    def groups(self, keep: torch.Tensor, group_size: int) -> Round:
        """The groups ``keep`` [n] bool of this round."""
        rows = keep.repeat_interleave(group_size).nonzero().squeeze(1)
        return Round(
            prompts=[p for p, k in zip(self.prompts, keep.tolist(), strict=True) if k],
            seqs=self.seqs.rows(rows),
            texts=[self.texts[i] for i in rows.tolist()],
            rewards=self.rewards[rows],
            truncated=self.truncated[rows],
            rollout_logp=None if self.rollout_logp is None else self.rollout_logp[rows],
            behaviour_logp=None if self.behaviour_logp is None else self.behaviour_logp[rows],
        )


def _differ(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """[n] bool: groups of ``rewards [n * G]`` whose values are not all equal."""
    r = rewards.view(-1, group_size)
    return (r.max(dim=1).values - r.min(dim=1).values) > 0


def sample_round(
    generator: Sampler, tokenizer, scorer: Scorer, prompts: list[Prompt], cfg: TrainConfig
) -> Round:
    """Generate G completions for each prompt and score them.

    With ``rollout.generation_batch_size`` the prompts are generated chunk by chunk; with
    ``rollout.overlap_scoring`` each chunk's scoring starts (in a background thread that
    hands the work to the scorer's worker processes) as soon as the chunk is generated,
    so it runs while the next chunk is generated. The scores are the same either way.
    """
    g = cfg.rollout.group_size
    per_call = max(1, (cfg.rollout.generation_batch_size or len(prompts) * g) // g)
    chunks = [prompts[start : start + per_call] for start in range(0, len(prompts), per_call)]
    overlap = cfg.rollout.overlap_scoring and len(chunks) > 1
    parts, scored, generating, start = [], [], 0.0, time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) if overlap else _Inline() as pool:
        for chunk in chunks:
            t0 = time.perf_counter()
            with forward_context(cfg.model):
                gen = generator.generate([p.ids for p in chunk], n=g, sampling=cfg.rollout.sampling)
            generating += time.perf_counter() - t0
            parts.append(gen)
            references = [p.reference for p in chunk for _ in range(g)]
            scored.append(pool.submit(scorer, list(gen.texts), references))
        scores = [future.result() for future in scored]
    waited = time.perf_counter() - start - generating
    seqs = concat([from_generation(gen) for gen in parts], tokenizer.pad_token_id)
    return Round(
        prompts=list(prompts),
        seqs=seqs,
        texts=[t for gen in parts for t in gen.texts],
        rewards=torch.tensor([float(v) for s in scores for v in s.values], dtype=torch.float32),
        truncated=torch.cat([gen.truncated.cpu() for gen in parts]),
        verifier=_summed(s.metrics() for s in scores),
        verifier_error=next((e for s in scores for e in s.errors if e), None),
        seconds={"generate": generating, "score": waited},
        rollout_logp=pad_logp([gen.logprobs for gen in parts], seqs.response_width),
    )


class _Inline:
    """``submit`` runs at once in the calling thread (the sequential path of :func:`sample_round`)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn, *args) -> Future[Scores]:
        future: Future[Scores] = Future()
        future.set_result(fn(*args))
        return future


class Rounds(NamedTuple):
    """A step's generation rounds."""

    sampled: list[Round]
    """Every round drawn (all count in the rollout metrics)."""
    kept: list[Round]
    """What the update learns from (under dynamic sampling: the informative groups only)."""


def collect_rounds(
    generator: Sampler,
    tokenizer,
    scorer: Scorer,
    prompts: list[Prompt],
    order: IndexSampler,
    cfg: TrainConfig,
) -> Rounds:
    """The step's rounds; with dynamic sampling ``kept`` holds only informative groups."""
    ro = cfg.rollout
    sampled, kept, have = [], [], 0
    rounds = ro.max_sampling_rounds if ro.dynamic_sampling else 1
    for _ in range(rounds):
        picked = [prompts[i] for i in order.take(ro.prompts_per_step)]
        rnd = sample_round(generator, tokenizer, scorer, picked, cfg)
        sampled.append(rnd)
        if not ro.dynamic_sampling:
            kept.append(rnd)
            break
        keep = rnd.informative(ro.group_size)
        excess = have + int(keep.sum()) - ro.prompts_per_step
        if excess > 0:  # drop the last informative groups beyond the target
            keep &= keep.cumsum(0) <= int(keep.sum()) - excess
        if keep.any():
            kept.append(rnd.groups(keep, ro.group_size))
            have += int(keep.sum())
        if have >= ro.prompts_per_step:
            break
    return Rounds(sampled, kept)


class Assembled(NamedTuple):
    """The update batch and the counts of what the filters did."""

    batch: RolloutBatch | None
    """What the update learns from (``None`` when every row was filtered out)."""
    metrics: dict[str, float]
    """``groups/*``, ``rollout/masked_truncated``, ``sampling/underfilled``."""


def assemble(kept: list[Round], pad_id: int, cfg: TrainConfig) -> Assembled:
    """The update batch from the kept groups, after the configured filters; plus its counts.

    Advantages and group statistics come from the whole groups first; the filters then
    drop rows, so filtered rows count in no denominator of the loss. Advantages (and so the
    zero-advantage filter) are of the shaped rewards; the group statistics, the batch's
    ``rewards`` (the SFT term's positives) and ``contrast_stats`` of the verifier's scores.
    """
    g, ro = cfg.rollout.group_size, cfg.rollout
    groups = sum(len(r.prompts) for r in kept)
    counts = {
        "groups/kept": float(groups),
        "groups/filtered_zero_adv": 0.0,
        "rollout/masked_truncated": 0.0,
    }
    counts["sampling/underfilled"] = float(ro.dynamic_sampling and groups < ro.prompts_per_step)
    if not kept:
        return Assembled(None, counts)
    rewards = torch.cat([r.rewards for r in kept])  # [B] verifier scores
    shaped = torch.cat([r.shaped(cfg) for r in kept])  # [B] plus the overlong penalty
    truncated = torch.cat([r.truncated for r in kept])  # [B]
    advantages = compute_advantages(shaped, g, cfg.objective.advantage_mode)  # [B]
    stats = cfg.objective.group_stats(rewards, g)
    seqs = concat([r.seqs for r in kept], pad_id)
    batch = RolloutBatch(
        seqs=seqs,
        rewards=rewards,
        advantages=advantages,
        group_stats=stats,
        rollout_logp=pad_logp([r.rollout_logp for r in kept], seqs.response_width),
        contrast_stats=contrast_stats(cfg, rewards),
        old_logp=pad_logp([r.behaviour_logp for r in kept], seqs.response_width),
    )
    keep = torch.ones(batch.size, dtype=torch.bool)  # [B]
    if ro.filter_zero_advantage:
        zero = zero_advantage_groups(shaped, g)  # [B / G]
        keep &= ~zero.repeat_interleave(g)
        counts["groups/kept"] -= float(zero.sum())
        counts["groups/filtered_zero_adv"] = float(zero.sum())
    if ro.mask_truncated:
        counts["rollout/masked_truncated"] = float((truncated & keep).sum())
        keep &= ~truncated
    if not keep.any():
        return Assembled(None, counts)
    return Assembled(batch if bool(keep.all()) else batch.rows(keep.nonzero().squeeze(1)), counts)


def contrast_stats(cfg: TrainConfig, rewards: torch.Tensor) -> dict[str, Any]:
    """Whole-group statistics of each ``log.contrast`` objective that reads them."""
    g = cfg.rollout.group_size
    stats = {c.label: c.objective.group_stats(rewards, g) for c in cfg.contrasts}
    return {label: s for label, s in stats.items() if s is not None}


def sequence_logp(model, seqs: SequenceBatch, cfg: TrainConfig) -> torch.Tensor:
    """[B, T] log-probs of the response tokens under ``model``, micro-batch by micro-batch."""
    out = torch.zeros(seqs.response_mask.shape, dtype=torch.float32)  # [B, T], a normal tensor
    with torch.inference_mode():
        _fill_logp(model, seqs, cfg, out)
    return out


def _fill_logp(model, seqs: SequenceBatch, cfg: TrainConfig, out: torch.Tensor) -> None:
    device = next(model.parameters()).device
    chunk, by_prompt = cfg.optim.micro_batch_size, cfg.model.share_prompt
    for index in micro_batches(seqs, chunk, by_prompt=by_prompt):
        micro = seqs.rows(index).trim_responses().to(device)
        stats = response_stats(
            model, micro, cfg.model, temperature=cfg.rollout.temperature, entropy=False
        )
        out[index, : micro.response_width] = stats.logp.float().cpu()


class WithLogp(NamedTuple):
    """The batch with its behaviour and reference log-probs, and the seconds they took."""

    batch: RolloutBatch
    """``old_logp`` / ``ref_logp`` filled where needed."""
    seconds: float
    """Wall time of the forward passes."""


def behaviour_logp(batch: RolloutBatch, policy, reference, cfg: TrainConfig) -> WithLogp:
    """``batch`` with old (if the batch is reused), proximal (if reused under
    ``rollout.decoupled``) and reference (if ``kl_coef > 0``) log-probs.

    Old log-probs the generation worker recorded (``rollout.staleness >= 1``) are kept: they
    are the sampling weights'; the current weights' are then the proximal policy's.
    """
    t0, ro = time.perf_counter(), cfg.rollout
    needed = ro.reuses_rollout and (batch.old_logp is None or ro.decoupled)
    current = sequence_logp(policy, batch.seqs, cfg) if needed else None
    old = batch.old_logp if batch.old_logp is not None else current
    ref = None
    if reference is not None:
        with adapters_off(reference):  # the base weights, where the policy carries LoRA adapters
            ref = sequence_logp(reference, batch.seqs, cfg)
    prox = current if ro.decoupled else None
    batch = dataclasses.replace(batch, old_logp=old, prox_logp=prox, ref_logp=ref)
    return WithLogp(batch, time.perf_counter() - t0)


def _summed(counts: Iterable[dict[str, float]]) -> dict[str, float]:
    """Counts added up name by name."""
    total: dict[str, float] = {}
    for part in counts:
        for name, value in part.items():
            total[name] = total.get(name, 0.0) + value
    return total


def check_scores(scores: Iterable[float], reward: RewardConfig) -> None:
    """Refuse a score outside ``reward.score_range``: it would train on another scale than
    ``reward.correct`` and ``reward.wrong`` say, and count in ``reward/accuracy`` and pass@k
    as correct (above ``reward.correct``) or be an unusually large penalty (below)."""
    (low, high), tol = reward.score_range, 1e-9
    bad = next((s for s in scores if not low - tol <= s <= high + tol), None)
    if bad is not None:
        rule = "a function without options correct and wrong scores 0 to 1"
        raise ValueError(
            f"reward.verifier {reward.verifier!r} scored a completion {bad:g}, outside "
            f"[{low:g}, {high:g}] (reward.wrong to reward.correct); {rule}, one with them "
            "scores from wrong to correct (docs/rewards.md)"
        )


def rollout_metrics(sampled: list[Round], cfg: TrainConfig) -> dict[str, float]:
    """Reward, accuracy, length and verifier metrics over every completion sampled this step.

    ``reward/mean``, ``reward/std`` and ``reward/accuracy`` are of the verifier's scores;
    ``groups/identical_frac`` of the shaped rewards (its groups have advantages all 0).
    """
    rewards = torch.cat([r.rewards for r in sampled])
    penalties = torch.cat([r.penalties(cfg) for r in sampled])
    lengths = torch.cat([r.lengths for r in sampled]).float()
    truncated = torch.cat([r.truncated for r in sampled]).float()
    empty = sum(not t.strip() for r in sampled for t in r.texts)
    g = cfg.rollout.group_size
    identical = torch.cat([~_differ(r.shaped(cfg), g) for r in sampled]).float()
    verifier = _summed(rnd.verifier for rnd in sampled)
    _warn_rollout(sampled, empty, verifier, bool(identical.all()))
    return {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std(unbiased=False)),
        "reward/accuracy": float((rewards >= cfg.reward.correct - 1e-9).float().mean()),
        "reward/overlong_penalty_mean": float(penalties.double().mean()),  # no float32 overflow
        "reward/overlong_frac": float((penalties < 0).float().mean()),
        "response/length_mean": float(lengths.mean()),
        "response/length_max": float(lengths.max()),
        "response/clipped_frac": float(truncated.mean()),
        "response/empty_frac": empty / len(rewards),
        "groups/identical_frac": float(identical.mean()),
        "sampling/rounds": float(len(sampled)),
        **verifier,
        "perf/generated_tokens": float(lengths.sum()),
        "time/generate": sum(r.seconds["generate"] for r in sampled),
        "time/score": sum(r.seconds["score"] for r in sampled),
    }


def _warn_rollout(
    sampled: list[Round], empty: int, verifier: dict[str, float], identical: bool
) -> None:
    """Warn about empty completions, verifier failures or timeouts, and a step whose every
    group has advantages all 0 (``identical``)."""
    failures = verifier.get("verifier/failures", 0.0)
    timeouts = verifier.get("verifier/timeouts", 0.0)
    # Constant messages: Python shows each once per run; the metrics count every step.
    if empty:
        warnings.warn(
            "empty completions sampled; scored as given (counted in response/empty_frac)",
            stacklevel=3,
        )
    if failures or timeouts:
        first = next((r.verifier_error for r in sampled if r.verifier_error), None)
        warnings.warn(
            "verifier failures or timeouts; scored reward.wrong (counted in verifier/failures, "
            "verifier/timeouts)" + (f"; first: {first[:300]}" if first else ""),
            stacklevel=3,
        )
    if identical:  # some such groups are normal; a step of only them learns nothing
        warnings.warn(
            "a step whose every group scored its completions alike: it has no learning signal "
            "(advantages all 0; counted in groups/identical_frac)",
            stacklevel=3,
        )


def samples(sampled: list[Round], k: int, cfg: TrainConfig | None = None) -> list[dict[str, Any]]:
    """The first ``k`` completions of the step, every round in turn, with prompt, reference
    and reward (the verifier's score); with ``cfg``'s ``reward.overlong_buffer`` set, also
    the completion's ``overlong_penalty`` (the update learned from their sum)."""
    rows: list[dict[str, Any]] = []
    for r in sampled:
        g = len(r.texts) // len(r.prompts)
        punished = cfg is not None and cfg.reward.overlong_buffer > 0
        penalties = r.penalties(cfg) if punished else None
        for i in range(min(k - len(rows), len(r.texts))):
            prompt = r.prompts[i // g]
            row = {"prompt": prompt.example.prompt, "reference": prompt.reference}
            row |= {"completion": r.texts[i], "reward": float(r.rewards[i])}
            if penalties is not None:
                row["overlong_penalty"] = float(penalties[i])
            rows.append(row)
    return rows
