"""One trainer of ``bench/vs_trl.py`` in its own process: run it, write its measurements.

    python bench/_vs_trl_child.py SPEC.json {rlvr|rlvr-async|trl|trl-defaults} RESULT.json WORK_DIR

The result holds, per step: wall seconds (from the end of the previous step, or from
the start of the first), generated completion tokens (up to and including EOS),
completions, the longest completion, the token counts of the distinct prompts, and the
seconds spent generating, scoring and updating; plus the process's
peak resident set (``VmHWM``), its resident set when the first step started, and a hash
of the token ids of the prompts the trainer actually sampled from, in order.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from vs_trl_config import TRAINERS, BenchSpec, data_config, reward_config, rlvr_config, trl_kwargs


def memory_mb(field: str) -> float:
    """``VmRSS`` or ``VmHWM`` of this process in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def gpu_peak_mb() -> float | None:
    """Peak memory torch allocated on the GPU (vLLM's KV cache included), or None on CPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / 2**20


def prompt_hash(ids: list[list[int]]) -> str:
    """Short hash of a list of token-id lists."""
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()[:16]


def load_prompts(spec: BenchSpec, tokenizer) -> list:
    """The fixed prompt list (``rlvr.train.prompts.Prompt``), as our trainer loads it."""
    from rlvr.train.prompts import load_prompt_set

    prompts = load_prompt_set(tokenizer, data_config(spec), role="train").prompts
    if len(prompts) != spec.num_prompts:
        raise RuntimeError(f"expected {spec.num_prompts} prompts, loaded {len(prompts)}")
    return prompts


class StepClock:
    """Wall time per step, from the end of the previous step (or the first step's start)."""

    def __init__(self) -> None:
        """No steps yet; the clock starts at the first :meth:`begin`."""
        self.steps: list[dict[str, Any]] = []
        self.setup_rss_mb: float | None = None
        self._start: float | None = None
        self._last_end: float | None = None

    def begin(self) -> None:
        """Start the clock (and note the resident set) at the first step; later calls do nothing."""
        if self._start is None:
            self.setup_rss_mb = memory_mb("VmRSS")
            self._start = time.perf_counter()

    def end(self, counts: dict[str, Any], phases: dict[str, float]) -> None:
        """Close a step: its wall time, ``counts`` (``tokens``, ``completions``, ``longest``,
        ``prompt_lengths`` of the distinct prompts)
        and ``phases`` (``generate``, ``score``, ``update`` seconds; ``other`` is the rest)."""
        now = time.perf_counter()
        seconds = now - (self._last_end if self._last_end is not None else self._start)
        self._last_end = now
        phases = {**phases, "other": seconds - sum(phases.values())}
        self.steps.append({"seconds": seconds, **counts, "phases": phases})

    def result(self, trainer: str, used: list[list[int]]) -> dict[str, Any]:
        """The measurements of the run, with the process's peak resident set so far.

        ``used`` are the token ids of the prompts the trainer sampled from, in order.
        """
        return {
            "trainer": trainer,
            "steps": self.steps,
            "peak_rss_mb": memory_mb("VmHWM"),
            "setup_rss_mb": self.setup_rss_mb,
            "peak_gpu_mb": gpu_peak_mb(),
            "prompt_hash": prompt_hash(used),
            "prompts_used": len(used),
        }


# ---------------------------------------------------------------- ours


def run_rlvr(spec: BenchSpec, work: Path, *, staleness: int = 0) -> dict[str, Any]:
    """``rlvr.train.train`` with every step timed and its prompts recorded by a callback.

    With ``staleness >= 1`` the generation worker samples while the trainer updates: the
    step's ``generate`` phase is the time the trainer waited for the batch, and the worker's
    own generation time and its wait for weights are recorded beside the phases.
    """
    from rlvr.train import Callback
    from rlvr.train.loop import train

    clock, used = StepClock(), []

    class Timing(Callback):
        def on_start(self, job, start_step):
            clock.begin()

        def on_step(self, job, step, record):
            metrics = record.metrics
            used.extend(list(p.ids) for p in record.prompts)
            counts = {
                "tokens": metrics["perf/generated_tokens"],
                "completions": spec.batch,
                "longest": metrics["response/length_max"],
                "prompt_lengths": [len(p.ids) for p in record.prompts],
            }
            update = (metrics.get("time/logp") or 0.0) + (metrics.get("time/update") or 0.0)
            phases = {"generate": metrics["time/generate"], "score": metrics["time/score"]}
            if staleness:
                counts["worker"] = {**phases, "wait_update": metrics["time/wait_update"]}
                phases = {"generate": metrics["time/wait_generation"], "score": 0.0}
            clock.end(counts, {**phases, "update": update})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = rlvr_config(spec, str(work / "run"), staleness=staleness)
        train(cfg, callbacks=[Timing()])
    return clock.result("rlvr-async" if staleness else "rlvr", used)


# ---------------------------------------------------------------- TRL


def run_trl(spec: BenchSpec, work: Path, *, trl_defaults: bool) -> dict[str, Any]:
    """TRL's ``GRPOTrainer`` on the same prompts, with our verifier as its reward function."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    from rlvr.data import format_prompt
    from rlvr.models import load_tokenizer
    from rlvr.train.loop import open_scorer

    torch.set_num_threads(spec.threads)
    tokenizer = load_tokenizer(spec.model_dir)
    prompts = load_prompts(spec, tokenizer)
    texts = [format_prompt(tokenizer, p.example.prompt, None) for p in prompts]
    ids = tokenizer(text=texts)["input_ids"]  # the call TRL makes on text prompts
    if [list(i) for i in ids] != [list(p.ids) for p in prompts]:
        raise RuntimeError("TRL's tokenisation of the templated prompts differs from ours")
    references = [p.reference for p in prompts]
    dataset = Dataset.from_dict({"prompt": texts, "row": list(range(len(texts)))})
    scorer = open_scorer(reward_config())
    clock, used = StepClock(), []
    trainer_cls, callback = timed_trainer_class(), phase_callback(clock)

    def chain_sum_reward(completions, row, completion_ids, **_):
        distinct = list(dict.fromkeys(row))  # each prompt's G rows once
        used.extend(list(ids[i]) for i in distinct)
        callback.prompt_lengths.extend(len(ids[i]) for i in distinct)
        lengths = [len(c) for c in completion_ids]
        callback.tokens += sum(lengths)
        callback.completions += len(lengths)
        callback.longest = max(callback.longest, *lengths)
        return [float(v) for v in scorer(completions, [references[i] for i in row]).values]

    trainer = trainer_cls(
        model=spec.model_dir,
        reward_funcs=chain_sum_reward,
        args=GRPOConfig(**trl_kwargs(spec, str(work / "out"), trl_defaults=trl_defaults)),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
    )
    trainer.phases = callback.phases
    with scorer, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return clock.result("trl-defaults" if trl_defaults else "trl", used)


def timed_trainer_class():
    """``GRPOTrainer`` whose phases add their wall time to ``self.phases``."""
    from trl import GRPOTrainer

    def timed(name: str, method):
        def wrapper(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

        return wrapper

    return type(
        "TimedGRPOTrainer",
        (GRPOTrainer,),
        {
            "_generate": timed("generate", GRPOTrainer._generate),
            "_calculate_rewards": timed("score", GRPOTrainer._calculate_rewards),
            "_generate_and_score_completions": timed(
                "rollout", GRPOTrainer._generate_and_score_completions
            ),
            "training_step": timed("training_step", GRPOTrainer.training_step),
            "_clip_grad_norm": timed("clip", GRPOTrainer._clip_grad_norm),
        },
    )


def phase_callback(clock: StepClock):
    """A ``TrainerCallback`` that closes each step on ``clock`` with TRL's phase times."""
    from transformers import TrainerCallback

    class PhaseCallback(TrainerCallback):
        def __init__(self) -> None:
            self.phases: dict[str, float] = {}
            self.tokens, self.completions, self.longest, self._opt = 0, 0, 0, 0.0
            self.prompt_lengths: list[int] = []

        def on_step_begin(self, args, state, control, **kwargs):
            clock.begin()

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            self._opt = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kwargs):
            self.phases["optimizer"] = time.perf_counter() - self._opt

        def on_step_end(self, args, state, control, **kwargs):
            p = self.phases
            # Forward + backward of every micro-batch (training_step minus the rollout in
            # its first call), gradient clipping and the optimiser step.
            update = p.get("training_step", 0.0) - p.get("rollout", 0.0)
            update += p.get("clip", 0.0) + p.get("optimizer", 0.0)
            counts = {"tokens": self.tokens, "completions": self.completions}
            counts.update(longest=self.longest, prompt_lengths=list(self.prompt_lengths))
            phases = {"generate": p.get("generate", 0.0), "score": p.get("score", 0.0)}
            clock.end(counts, {**phases, "update": update})
            self.phases.clear()
            self.tokens, self.completions, self.longest = 0, 0, 0
            self.prompt_lengths.clear()

    return PhaseCallback()


def main(argv: list[str]) -> int:
    """``SPEC.json TRAINER RESULT.json WORK_DIR``: run the trainer, write its result."""
    spec_file, trainer, out_file, work = argv
    spec = BenchSpec(**json.loads(Path(spec_file).read_text()))
    work_dir = Path(work)
    work_dir.mkdir(parents=True, exist_ok=True)
    if trainer in ("rlvr", "rlvr-async"):
        result = run_rlvr(spec, work_dir, staleness=int(trainer == "rlvr-async"))
    elif trainer in ("trl", "trl-defaults"):
        result = run_trl(spec, work_dir, trl_defaults=trainer == "trl-defaults")
    else:
        raise ValueError(f"trainer must be one of {TRAINERS}, got {trainer!r}")
    Path(out_file).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
