"""rlvr on one CUDA GPU in one call: tests, training, TRL, and rlvr against TRL.

    bash bench/gpu/check.sh                  # the entry point: installs the carried wheels first
    python bench/gpu/check.py --out DIR      # what it runs (needs CUDA and the packages)

Each section runs as its own process with its own time limit; a failure or a timeout is
recorded and the next section still runs, and no section starts once ``--budget`` seconds
have passed. Sections:

1. ``tests/test_cuda.py``: every objective (float64 and float32) and the ops on CUDA
   against the CPU on the same inputs;
2. ``tests/objectives/test_host_sync.py`` on CUDA: no host-device sync in any objective's
   loss and backward, under ``torch.cuda.set_sync_debug_mode("error")``;
3. ``rlvr train`` on the tiny preset (the demo's task), fp32 and bf16 autocast (``lean`` and
   ``hf`` samplers);
4. ``rlvr train`` on a random Qwen2-0.5B-shaped model (``random_qwen2.py``), fp32 and bf16
   autocast, the ``lean`` sampler, and bf16 with the ``hf`` sampler (throughput);
5. ``RlvrGRPOTrainer`` (TRL) for two steps on the tiny preset (``examples/trl_abc_grpo.py``);
6. ``bench/vs_trl.py``: rlvr against TRL's ``GRPOTrainer`` (HF generation) on the Qwen2-shaped
   model, one identical configuration;
7. ``bench/gpu/decode_profile.py`` on the Qwen2-shaped model, ``lean`` alone (16 tokens, one
   repeat), last: milliseconds per decoding step in fp32, under bf16 autocast, and under bf16
   autocast with attention off cuDNN (as ``rlvr train`` runs it), the operator calls per step
   (whether decoding is bound by the host) and the costliest operators (in ``check.log``);
8. only when named (``--sections decode``): the same profile of every sampler on the tiny
   preset (about 120 s on an H100);
9. only when named (``--sections compare``): ``rlvr compare abc`` for 3 steps on one seed
   with every run on CUDA (``settings.model.device=cuda``), its two workers sharing the GPU;
10. only when named (``--sections lora``): the Qwen2-shaped bf16-autocast row of section 4
   with rank-16 LoRA adapters on every linear layer (``model.lora.rank=16``), then the
   ``lean`` decoding step (bf16 autocast, attention off cuDNN) with the model's weights
   trainable, frozen, and frozen with adapters (``decode_profile.py --weights``): whether
   frozen weights, which autocast does not keep cast, cost the LoRA sampler its time.

Rows of ``rlvr train`` report the peak GPU memory (``perf/peak_gpu_mb``).
``--sections`` runs a subset, or adds ``decode``, ``compare`` or ``lora`` (``tests decode
compare tiny trl qwen lora vs_trl qwen-decode``). Writes ``results.md`` (the table for docs/benchmarks.md), ``results.json`` and ``check.log``
(every section's output) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SECTIONS = ("tests", "decode", "compare", "tiny", "trl", "qwen", "lora", "vs_trl", "qwen-decode")
DEFAULT_SECTIONS = tuple(s for s in SECTIONS if s not in ("decode", "compare", "lora"))
"""What one call runs unless told: about 420 s on an H100 by the section times of earlier calls
(not yet timed as one call). The tiny preset's decode profile (``decode``, about 120 s) is
asked for by name."""


@dataclass
class Outcome:
    """One section's row of the results table."""

    section: str
    status: str
    """``ok``, ``failed``, ``timeout`` or ``skipped``."""
    seconds: float
    numbers: str
    """What it measured, in a few words."""


class Checker:
    """Runs sections in order under one time budget and collects their outcomes."""

    def __init__(self, out: Path, budget: float) -> None:
        self.out, self.budget, self.t0 = out, budget, time.monotonic()
        self.log = (out / "check.log").open("a")
        self.outcomes: list[Outcome] = []
        self.last_seconds = 0.0
        """Wall seconds of the last section run."""

    def run(self, section: str, cmd: list[str], timeout: float, env=None) -> tuple[bool, str]:
        """Run ``cmd`` from the repository root; ``(succeeded, output)``, the outcome recorded
        as ``failed`` or ``timeout`` (the caller records ``ok`` with its numbers)."""
        left = self.budget - (time.monotonic() - self.t0)
        if left < 20:
            self.record(section, "skipped", 0.0, f"budget spent ({self.budget:.0f} s)")
            return False, ""
        self.log.write(f"\n===== {section}: {' '.join(cmd)}\n")
        self.log.flush()
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                cmd,
                cwd=ROOT,
                env={**os.environ, **(env or {})},
                capture_output=True,
                text=True,
                timeout=min(timeout, left),
            )
            output, ok = proc.stdout + proc.stderr, proc.returncode == 0
            status = "failed"
        except subprocess.TimeoutExpired as err:
            output = _text(err.stdout) + _text(err.stderr)
            ok, status = False, "timeout"
        self.log.write(output)
        self.log.flush()
        self.last_seconds = time.monotonic() - t0
        if not ok:
            self.record(section, status, self.last_seconds, _last_line(output))
        return ok, output

    def record(self, section: str, status: str, seconds: float, numbers: str) -> None:
        self.outcomes.append(Outcome(section, status, round(seconds, 1), numbers))
        print(f"{status:>8}  {section}: {numbers}", flush=True)


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def _pytest_counts(output: str) -> str:
    """pytest's closing counts (``12 passed, 2 failed in 3.4s``)."""
    found = re.findall(r"=+ (.*? in [\d.]+s.*?) =+", output)
    return found[-1] if found else _last_line(output)


# ---------------------------------------------------------------- sections


def tests(check: Checker) -> None:
    section = "tests/test_cuda.py + test_host_sync.py (CUDA)"
    files = ["tests/test_cuda.py", "tests/objectives/test_host_sync.py"]
    ok, output = check.run(
        section, [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files], 180
    )
    if ok:
        check.record(section, "ok", check.last_seconds, _pytest_counts(output))
    elif output and check.outcomes[-1].status == "failed":
        check.outcomes[-1].numbers = _pytest_counts(output)


PHASES = ("generate", "logp", "update")
"""The step's parts ``train_numbers`` reports (``time/<phase>`` in metrics.jsonl)."""


def train_numbers(run_dir: Path) -> str:
    """Median seconds per step and per phase (the first step left out), generated tokens/s,
    reward first -> last."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open() if line.strip()]
    steps = [r for r in rows if "time/step" in r]
    timed = steps[1:] or steps
    times = [r["time/step"] for r in timed]
    tokens = sum(r.get("perf/generated_tokens", 0) for r in timed)
    phases = " / ".join(
        f"{statistics.median(r.get(f'time/{p}', 0.0) for r in timed):.2f}" for p in PHASES
    )
    reward = [r.get("reward/mean") for r in steps]
    gpu = [r["perf/peak_gpu_mb"] for r in steps if "perf/peak_gpu_mb" in r]
    return (
        f"{statistics.median(times):.3f} s/step ({'/'.join(PHASES)} {phases} s), "
        f"{tokens / sum(times):,.0f} gen tok/s, "
        f"reward {reward[0]:.3f} -> {reward[-1]:.3f} ({len(steps)} steps)"
        + (f", peak GPU {max(gpu):,.0f} MiB" if gpu else "")
    )


def train(check: Checker, work: Path, label: str, model: str, steps: int, extra: list[str]) -> None:
    run_dir = work / label
    cmd = [PY, "-m", "rlvr", "train", f"model.name={model}", "model.device=cuda",
           f"steps={steps}", "eval.at_start=false", "eval.at_end=false",
           "checkpoint.save_final=false", f"log.output_dir={run_dir}", *extra]  # fmt: skip
    ok, _ = check.run(f"rlvr train {label}", cmd, timeout=150)
    if ok:
        check.record(f"rlvr train {label}", "ok", check.last_seconds, train_numbers(run_dir))


def qwen2(check: Checker, work: Path, tokenizer: Path) -> Path | None:
    model = work / "qwen2-0.5b-random"
    ok, output = check.run(
        "build random Qwen2-0.5B",
        [PY, "bench/gpu/random_qwen2.py", "--tokenizer", str(tokenizer), "--out", str(model)],
        timeout=120,
    )
    if not ok:
        return None
    built = [line for line in output.splitlines() if " B parameters" in line]
    numbers = built[-1].split(" ->")[0] if built else _last_line(output)
    check.record("build random Qwen2-0.5B", "ok", check.last_seconds, numbers)
    return model


def trl_trainer(check: Checker, work: Path) -> None:
    section = "RlvrGRPOTrainer (TRL) 2 steps, tiny"
    cmd = [PY, "examples/trl_abc_grpo.py", "--model", "tiny", "--steps", "2", "--out",
           str(work / "trl")]  # fmt: skip
    ok, output = check.run(section, cmd, timeout=150)
    if ok:
        found = "clip/q1_share" in output
        check.record(section, "ok" if found else "failed", check.last_seconds,
                     "rlvr metrics in TRL's log" if found else "no rlvr metric in the log")  # fmt: skip


def vs_trl(check: Checker, work: Path, model: Path) -> str:
    section = "bench/vs_trl.py, Qwen2-0.5B random"
    cmd = [PY, "bench/vs_trl.py", "--device", "cuda", "--presets", str(model), "--steps", "3",
           "--warmup", "1", "--threads", "4", "--prompts", "8", "--group-size", "8",
           "--max-new-tokens", "128", "--micro-batch", "16", "--out", str(work / "vs_trl.json")]  # fmt: skip
    ok, output = check.run(section, cmd, timeout=240)
    if not ok:
        return ""
    table = [line for line in output.splitlines() if line.startswith(("|", "##"))]
    speed = [line for line in table if "steps / s" in line]
    check.record(section, "ok", check.last_seconds, speed[0] if speed else "see table")
    return "\n".join(table)


ALL_MODES = "fp32 / bf16 / bf16 off cuDNN"


def decode(check: Checker, label: str, model: str, extra: tuple[str, ...] = ()) -> None:
    section = f"decode step {label}"
    cmd = [PY, "bench/gpu/decode_profile.py", "--model", model, "--device", "cuda", *extra]
    ok, output = check.run(section, cmd, timeout=150)
    if ok:
        summary = [line for line in output.splitlines() if line.startswith("ms/step")]
        check.record(section, "ok", check.last_seconds, summary[-1] if summary else "see log")


def study_numbers(out: Path, study: str, device: str) -> tuple[str, str]:
    """``(status, numbers)`` of a finished ``rlvr compare`` under ``out``: whether every run
    was on ``device`` (its ``run.yaml``), each arm's final held-out avg@4, the claims judged."""
    import yaml

    runs = sorted((out / "runs").glob("*/seed*/run.yaml"))
    devices = {yaml.safe_load(r.read_text())["model"]["device"] for r in runs}
    results = json.loads((out / study / "results.json").read_text())
    finals = ", ".join(
        f"{name} {arm['final']['eval/avg@4'][0]:.3f}"
        for name, arm in results["arms"].items()
        if arm["final"].get("eval/avg@4")
    )
    status = "ok" if runs and devices == {device} else "failed"
    return status, (
        f"{len(runs)} runs on {'/'.join(sorted(devices)) or 'nothing'}; held-out avg@4 {finals}; "
        f"{len(results['claims'])} claims judged"
    )


def study(check: Checker, work: Path, device: str = "cuda") -> None:
    section = f"rlvr compare abc on {device}, 2 runs x 3 steps, --jobs 2"
    out = work / "compare"
    cmd = [PY, "-m", "rlvr", "compare", "abc", "steps=3", "seeds=[0]",
           f"settings.model.device={device}", "--out", str(out),
           "--jobs", "2"]  # fmt: skip
    ok, _ = check.run(section, cmd, timeout=240)
    if ok:
        status, numbers = study_numbers(out, "abc", device)
        check.record(section, status, check.last_seconds, numbers)


def environment() -> str:
    """The GPU, the host's CPU (decoding here is bound by the host) and the software."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    from host import cpu_model

    props = torch.cuda.get_device_properties(0)
    return (
        f"{torch.cuda.get_device_name(0)}, {props.total_memory / 2**30:.0f} GiB, "
        f"{props.multi_processor_count} SMs; host {cpu_model()}, {os.cpu_count()} cores; "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, Python {sys.version.split()[0]}"
    )


def write(out: Path, env: str, check: Checker, vs_table: str) -> None:
    rows = [f"| {o.section} | {o.status} | {o.seconds:.0f} | {o.numbers} |" for o in check.outcomes]
    text = "\n".join(
        [
            f"GPU check ({time.strftime('%Y-%m-%d')}): {env}",
            "",
            "| section | status | seconds | measured |",
            "| --- | --- | ---: | --- |",
            *rows,
            "",
            vs_table,
        ]
    )
    (out / "results.md").write_text(text + "\n")
    (out / "results.json").write_text(
        json.dumps({"environment": env, "sections": [asdict(o) for o in check.outcomes]}, indent=1)
    )
    print(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rlvr-gpu-check"))
    parser.add_argument("--carry", type=Path, default=ROOT / ".gpu-carry")
    parser.add_argument("--budget", type=float, default=440, help="seconds for all sections")
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(DEFAULT_SECTIONS),
        help="what to run",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    check = Checker(args.out, args.budget)
    env = environment()
    print(env, flush=True)
    sections = set(args.sections)
    if "tests" in sections:
        tests(check)
    if "decode" in sections:
        decode(check, f"tiny, {ALL_MODES}", "tiny")
    if "compare" in sections:
        study(check, args.work)
    small = ["rollout.prompts_per_step=16", "rollout.group_size=8", "threads=4"]
    if "tiny" in sections:
        train(check, args.work, "tiny fp32", "tiny", 8, small)
        train(check, args.work, "tiny bf16-autocast", "tiny", 8, [*small, "model.autocast=bf16"])
        train(check, args.work, "tiny bf16-autocast hf-sampler", "tiny", 8,
              [*small, "model.autocast=bf16", "rollout.sampler=hf"])  # fmt: skip
    if "trl" in sections:
        trl_trainer(check, args.work)
    table = ""
    model = (
        qwen2(check, args.work, args.carry / "smollm2-tokenizer")
        if sections & {"qwen", "lora", "vs_trl", "qwen-decode"}
        else None
    )
    big = ["rollout.max_new_tokens=128", "optim.micro_batch_size=32", *small]
    if model is not None and "qwen" in sections:
        train(check, args.work, "qwen2-0.5b fp32", str(model), 4, big)
        train(check, args.work, "qwen2-0.5b bf16-autocast", str(model), 4,
              [*big, "model.autocast=bf16"])  # fmt: skip
        train(check, args.work, "qwen2-0.5b bf16-autocast hf-sampler", str(model), 4,
              [*big, "model.autocast=bf16", "rollout.sampler=hf"])  # fmt: skip
    if model is not None and "lora" in sections:  # against the bf16-autocast row of "qwen"
        train(check, args.work, "qwen2-0.5b bf16-autocast lora16", str(model), 4,
              [*big, "model.autocast=bf16", "model.lora.rank=16"])  # fmt: skip
        for weights in ("trainable", "frozen", "lora"):  # does autocast re-cast frozen weights?
            decode(check, f"qwen2-0.5b lean, bf16 off cuDNN, {weights} weights", str(model),
                   ("--samplers", "lean", "--tokens", "32", "--modes", "bf16-no-cudnn",
                    "--weights", weights))  # fmt: skip
    if model is not None and "vs_trl" in sections:
        table = vs_trl(check, args.work, model)
    if model is not None and "qwen-decode" in sections:  # last: its profiler takes a while
        decode(check, f"qwen2-0.5b lean, {ALL_MODES}", str(model),
               ("--samplers", "lean", "--tokens", "16", "--repeats", "1"))  # fmt: skip
    write(args.out, env, check, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
