"""``bench/vs_trl.py``'s report: per-trainer summaries, the table, and the pass/fail targets."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from vs_trl_config import BenchSpec
from vs_trl_machine import Floors


@dataclass(frozen=True)
class Targets:
    """What the comparison should show (``None``: not checked)."""

    speed: float = 2.5
    """rlvr's steps/s over TRL's, at least (every preset, every thread count)."""
    memory: float | None = 0.6
    """rlvr's peak RSS over TRL's on ``smollm2-135m``, at most."""
    generation_floor: float | None = 0.6
    """rlvr's generation floor over its generation time on ``smollm2-135m``, at least."""
    update_gemm: float | None = 0.8
    """rlvr's update FLOP rate over the measured GEMM rate on ``smollm2-135m``, at least."""
    async_own: float = 1.4
    """rlvr at ``rollout.staleness=1`` over rlvr's synchronous steps/s, at least."""
    async_trl: float = 2.8
    """rlvr at ``rollout.staleness=1`` over TRL's steps/s (same table), at least."""


TARGETS = Targets()


@dataclass(frozen=True)
class Summary:
    """One trainer's numbers over the measured steps."""

    trainer: str
    """``rlvr``, ``trl`` or ``trl-defaults``."""
    seconds_per_step: float
    """Median step time."""
    tokens_per_s: float
    """Generated completion tokens / time."""
    length_mean: float
    """Mean completion length in tokens (EOS included)."""
    longest_mean: float
    """Mean over steps of the step's longest completion: the decode steps generation runs."""
    ms_per_token: float
    """Time per generated completion token."""
    peak_rss_mb: float
    """Peak resident set of the whole process (MiB)."""
    setup_rss_mb: float
    """Resident set when the first step started (model, optimiser state not yet allocated)."""
    phases: dict[str, float]
    """Median seconds per step of ``generate``, ``score``, ``update``, ``other``."""
    peak_gpu_mb: float | None = None
    """Peak GPU memory torch allocated (``None`` on CPU)."""
    worker: dict[str, float] = field(default_factory=dict)
    """``rlvr-async`` only: median seconds per step of the worker's ``generate`` and its
    ``wait_update`` (waiting for the weights its next batch is sampled from)."""
    floor_shares: dict[str, float] = field(default_factory=dict)
    """``generate`` / ``update``: the phase's floor over its time, summed over the measured
    steps; ``update_gemm``: the update's FLOP rate over the GEMM rate (empty: not measured)."""

    @property
    def steps_per_s(self) -> float:
        """Steps per second (from the median step time)."""
        return 1.0 / self.seconds_per_step


def summarize(result: dict[str, Any], warmup: int, floors: Floors | None = None) -> Summary:
    """:class:`Summary` of a child's result, leaving out the first ``warmup`` steps.

    ``floors``: also each phase's share of its floor (steps must carry ``prompt_lengths``).
    """
    steps = result["steps"][warmup:]
    if not steps:
        raise ValueError(f"{result['trainer']}: no measured steps after {warmup} warm-up step(s)")
    seconds = [s["seconds"] for s in steps]
    tokens = sum(s["tokens"] for s in steps)
    completions = sum(s["completions"] for s in steps)
    phases = {
        name: statistics.median(s["phases"][name] for s in steps)
        for name in ("generate", "score", "update", "other")
    }
    return Summary(
        trainer=result["trainer"],
        seconds_per_step=statistics.median(seconds),
        tokens_per_s=tokens / sum(seconds),
        length_mean=tokens / completions,
        longest_mean=statistics.fmean(s["longest"] for s in steps),
        ms_per_token=1000 * sum(seconds) / tokens,
        peak_rss_mb=result["peak_rss_mb"],
        setup_rss_mb=result["setup_rss_mb"],
        peak_gpu_mb=result.get("peak_gpu_mb"),
        phases=phases,
        worker={
            name: statistics.median(s["worker"][name] for s in steps)
            for name in ("generate", "wait_update")
        }
        if "worker" in steps[0]
        else {},
        floor_shares={} if floors is None else floors.shares(steps),
    )


ROWS = (
    ("seconds / step (median)", "seconds_per_step", "{:.2f}"),
    ("steps / s", "steps_per_s", "{:.3f}"),
    ("tokens / s (generated)", "tokens_per_s", "{:.0f}"),
    ("mean completion length", "length_mean", "{:.1f}"),
    ("longest completion / step (mean)", "longest_mean", "{:.1f}"),
    ("ms / generated token", "ms_per_token", "{:.2f}"),
    ("peak RSS (MiB)", "peak_rss_mb", "{:.0f}"),
    ("RSS at first step (MiB)", "setup_rss_mb", "{:.0f}"),
)


def _ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``1.23x``; ``n/a`` when ``theirs`` is zero."""
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


FLOOR_ROWS = (
    ("  generate: floor / time", "generate"),
    ("  update: floor / time", "update"),
    ("  update: FLOP rate / GEMM rate", "update_gemm"),
)


def format_table(summaries: list[Summary]) -> list[str]:
    """Markdown table: one column per trainer, then ``rlvr / <trainer>`` for each other one."""
    others = summaries[1:]
    head = ["", *(s.trainer for s in summaries), *(f"rlvr / {s.trainer}" for s in others)]
    rows = [(label, fmt, [getattr(s, attr) for s in summaries]) for label, attr, fmt in ROWS] + [
        (f"  {phase} s / step", "{:.2f}", [s.phases[phase] for s in summaries])
        for phase in ("generate", "score", "update", "other")
    ]
    if all(s.peak_gpu_mb is not None for s in summaries):
        rows.append(("peak GPU memory (MiB)", "{:.0f}", [s.peak_gpu_mb for s in summaries]))
    if summaries[0].floor_shares:
        rows += [
            (label, "{:.0%}", [s.floor_shares.get(key) for s in summaries])
            for label, key in FLOOR_ROWS
        ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for label, fmt, values in rows:
        cells = ["-" if v is None else fmt.format(v) for v in values]
        ratios = ["-" if v is None else _ratio(values[0], v) for v in values[1:]]
        lines.append("| " + " | ".join([label, *cells, *ratios]) + " |")
    return lines


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def target_lines(preset: str, ours: Summary, trl: Summary, targets: Targets = TARGETS) -> list[str]:
    """Whether ``targets`` are met against the matched TRL run (memory and floors on ``smollm2-135m``)."""
    speed = ours.steps_per_s / trl.steps_per_s
    memory = ours.peak_rss_mb / trl.peak_rss_mb
    per_token = trl.ms_per_token / ours.ms_per_token
    lines = [
        f"steps/s rlvr / TRL = {speed:.2f}x (target >= {targets.speed:g}x): "
        f"{_verdict(speed >= targets.speed)}",
        # Sampling differs, so the completions (and the work per step) differ in length.
        f"  per generated token: {per_token:.2f}x as fast "
        f"(mean completion length {ours.length_mean:.1f} vs {trl.length_mean:.1f} tokens, "
        f"longest per step {ours.longest_mean:.1f} vs {trl.longest_mean:.1f})",
    ]
    if preset != "smollm2-135m":
        return lines
    if targets.memory is not None:
        lines.append(
            f"peak RSS rlvr / TRL = {memory:.2f}x (target <= {targets.memory:g}x): "
            f"{_verdict(memory <= targets.memory)}"
        )
    shares = ours.floor_shares
    if shares and targets.generation_floor is not None:
        lines.append(
            f"generation at {shares['generate']:.0%} of its floor "
            f"(target >= {targets.generation_floor:.0%}): "
            f"{_verdict(shares['generate'] >= targets.generation_floor)}"
        )
    if shares and targets.update_gemm is not None:
        lines.append(
            f"update at {shares['update_gemm']:.0%} of the GEMM rate "
            f"(target >= {targets.update_gemm:.0%}): "
            f"{_verdict(shares['update_gemm'] >= targets.update_gemm)}"
        )
    return lines


def async_lines(
    sync: Summary, stale: Summary, trl: Summary, targets: Targets = TARGETS
) -> list[str]:
    """``rlvr-async`` (``rollout.staleness=1``, one-step off-policy: not the equal
    configuration) against the synchronous trainer and TRL of the same table."""
    own, theirs = stale.steps_per_s / sync.steps_per_s, stale.steps_per_s / trl.steps_per_s
    return [
        "rlvr-async is rlvr at rollout.staleness=1 (one-step off-policy, not the equal "
        "configuration); its generate phase is the trainer's wait for the batch",
        f"steps/s rlvr-async / rlvr = {own:.2f}x (target >= {targets.async_own:g}x): "
        f"{_verdict(own >= targets.async_own)}",
        f"steps/s rlvr-async / TRL = {theirs:.2f}x (target >= {targets.async_trl:g}x): "
        f"{_verdict(theirs >= targets.async_trl)}",
        f"  waits per step (median): trainer on generation {stale.phases['generate']:.2f} s, "
        f"worker on weights {stale.worker['wait_update']:.2f} s; the worker's own "
        f"generation {stale.worker['generate']:.2f} s",
    ]


def heading(preset: str, spec: BenchSpec) -> str:
    """The table's heading: the shared configuration, and the settings when not equal."""
    line = (
        f"## {preset}: {spec.prompts_per_step} prompts x G={spec.group_size}, "
        f"{spec.max_new_tokens} new tokens, micro-batch {spec.micro_batch}, "
        f"{spec.threads} thread(s), {spec.steps} measured step(s) after {spec.warmup} warm-up"
    )
    if spec.settings == "best":
        precision = "bf16" if spec.bf16 else "fp32 (no native bf16)"
        line += f"; each trainer at its best: gradient checkpointing, {precision}"
    if spec.device != "cpu" or spec.sampler != "lean":
        line += f"; {spec.device}, sampler {spec.sampler}"
    return line


def report(
    preset: str,
    spec: BenchSpec,
    results: dict[str, Any],
    floors: Floors | None = None,
    targets: Targets = TARGETS,
) -> list[str]:
    """The preset's heading, table and target verdicts (targets at equal settings only)."""
    summaries = {
        t: summarize(results[t], spec.warmup, None if t == "rlvr-async" else floors)
        for t in results
    }
    lines = [heading(preset, spec), "", *format_table(list(summaries.values())), ""]
    if spec.settings == "equal":
        lines += target_lines(preset, summaries["rlvr"], summaries["trl"], targets)
    if "rlvr-async" in summaries:
        lines += async_lines(summaries["rlvr"], summaries["rlvr-async"], summaries["trl"], targets)
    return lines
