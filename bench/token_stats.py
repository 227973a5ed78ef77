"""Chunked vs naive per-token log-probs + entropy: time and peak memory, forward + backward.

    PYTHONPATH=src python bench/token_stats.py                  # N=8x1024, H=576, V=49152
    PYTHONPATH=src python bench/token_stats.py --n 1024 --vocab 8192   # a quick one

Each variant runs in its own fresh Python process (with glibc's mmap threshold fixed at
128 KiB, so freed blocks go back to the OS), so one cannot inherit the other's freed
memory. Loss = sum(a * logp) + sum(c * entropy) with fixed random a, c; the
backward produces gradients for ``hidden`` and ``weight``.

- ``naive``: ``log_softmax`` over the whole ``[N, V]`` float32 logits, gather, entropy,
  plain autograd.
- ``chunked``: :func:`rlvr.ops.token_logprobs_entropy`.

Memory on CPU is the process's peak resident set (Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` once the inputs exist) minus its resident set at that moment:
the extra memory the forward + backward needed, gradients included. On CUDA it is
``torch.cuda.max_memory_allocated`` minus the allocation before the run. Times are the
best of ``--repeats`` runs; on a shared machine read them as rough.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from rlvr.ops import token_logprobs_entropy

VARIANTS = ("naive", "chunked")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=8 * 1024, help="rows (tokens) N")
    p.add_argument("--hidden", type=int, default=576, help="hidden size H")
    p.add_argument("--vocab", type=int, default=49152, help="vocabulary size V")
    p.add_argument("--chunk-size", type=int, default=1024, help="rows per chunk (chunked variant)")
    p.add_argument(
        "--dtype", choices=["float32", "bfloat16"], default="float32", help="input dtype"
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--repeats", type=int, default=1, help="timed forward+backward runs per variant")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def make_inputs(args: argparse.Namespace):
    """hidden [N, H], weight [V, H] leaves, labels [N], loss weights a, c [N]."""
    g = torch.Generator().manual_seed(0)
    dtype = getattr(torch, args.dtype)
    hidden = torch.randn(args.n, args.hidden, generator=g).to(args.device, dtype).requires_grad_()
    weight = (torch.randn(args.vocab, args.hidden, generator=g) * args.hidden**-0.5).to(
        args.device, dtype
    )
    weight.requires_grad_()
    labels = torch.randint(0, args.vocab, (args.n,), generator=g).to(args.device)
    a, c = torch.randn(2, args.n, generator=g).to(args.device)
    return hidden, weight, labels, a, c


def naive_stats(hidden, weight, labels):
    """Full ``[N, V]`` float32 logits, log-softmax, gather and entropy."""
    logp_all = torch.log_softmax(hidden.float() @ weight.float().T, dim=-1)  # [N, V]
    logp = logp_all.gather(1, labels[:, None]).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def run_once(variant: str, args: argparse.Namespace, inputs) -> tuple[float, dict[str, float]]:
    """One forward + backward; returns (seconds, checksums of the results)."""
    hidden, weight, labels, a, c = inputs
    hidden.grad = weight.grad = None
    _sync(args.device)
    start = time.perf_counter()
    if variant == "naive":
        logp, entropy = naive_stats(hidden, weight, labels)
    else:
        logp, entropy = token_logprobs_entropy(hidden, weight, labels, chunk_size=args.chunk_size)
    ((a * logp).sum() + (c * entropy).sum()).backward()
    _sync(args.device)
    seconds = time.perf_counter() - start
    sums = {
        "logp_sum": logp.sum().item(),
        "entropy_sum": entropy.sum().item(),
        "grad_hidden_norm": hidden.grad.float().norm().item(),
        "grad_weight_norm": weight.grad.float().norm().item(),
    }
    return seconds, sums


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _proc_kib(field: str) -> int:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak(device: str) -> int:
    """Reset the peak-memory counter; return the current usage in bytes."""
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
    return _proc_kib("VmRSS") * 1024


def _peak(device: str) -> int:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated()
    return _proc_kib("VmHWM") * 1024


def worker(args: argparse.Namespace) -> dict:
    """Measure one variant in this process; the result is printed as one JSON line."""
    if args.threads:
        torch.set_num_threads(args.threads)
    inputs = make_inputs(args)
    times, peaks, sums = [], [], {}
    for _ in range(args.repeats):
        base = _reset_peak(args.device)
        seconds, sums = run_once(args.worker, args, inputs)
        times.append(seconds)
        peaks.append(_peak(args.device) - base)
    return {"variant": args.worker, "seconds": min(times), "peak_bytes": max(peaks), **sums}


def launch(variant: str, argv: list[str]) -> dict:
    """Run one variant in a fresh interpreter and parse its JSON line."""
    cmd = [sys.executable, __file__, *argv, "--worker", variant]
    # A fixed mmap threshold makes glibc return every freed block >= 128 KiB to the OS,
    # so the resident set follows the live tensors instead of a retained heap.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(args: argparse.Namespace, rows: list[dict]) -> None:
    n, v = args.n, args.vocab
    print(
        f"N={n} H={args.hidden} V={v} dtype={args.dtype} device={args.device} "
        f"chunk={args.chunk_size} threads={torch.get_num_threads() if not args.threads else args.threads}"
    )
    print(
        f"one [N, V] float32 tensor = {n * v * 4 / 2**20:.0f} MiB; one [chunk, V] = {min(n, args.chunk_size) * v * 4 / 2**20:.0f} MiB"
    )
    anchor = rows[0]
    print(f"{'variant':8s} {'fwd+bwd s':>10s} {'x naive':>8s} {'peak MiB':>10s} {'x naive':>8s}")
    for r in rows:
        print(
            f"{r['variant']:8s} {r['seconds']:10.2f} {r['seconds'] / anchor['seconds']:8.2f} "
            f"{r['peak_bytes'] / 2**20:10.0f} {r['peak_bytes'] / anchor['peak_bytes']:8.3f}"
        )
    for key in ("logp_sum", "entropy_sum", "grad_hidden_norm", "grad_weight_norm"):
        vals = [r[key] for r in rows]
        print(
            f"check {key}: "
            + "  ".join(f"{r['variant']}={x:.6g}" for r, x in zip(rows, vals, strict=True))
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    report(args, [launch(v, argv) for v in VARIANTS])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
