"""Where a decoding step's time goes, fp32 against bfloat16 autocast, per sampler.

    python bench/gpu/decode_profile.py --model tiny --device cuda
    python bench/gpu/decode_profile.py --model PATH --device cuda --rows 128 --tokens 64

Samples ``rows`` completions (``group`` per prompt, EOS never drawn, so every row runs the
whole ``tokens`` budget) with ``lean`` (its Llama-family decoder), ``lean`` through the
Hugging Face forward (``fast=False``) and ``hf`` (``model.generate``), each in fp32 and
under bf16 autocast; prints milliseconds per decoding step (median of ``--repeats``) and the
operator calls per step. Then profiles one bf16 ``lean`` run and prints its 20 costliest
operators. bench/gpu/check.py runs it as its ``decode`` section.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr.generation.base import SamplingConfig
from rlvr.generation.hf import HFOptions, HFSampler
from rlvr.generation.lean import sample_lean


def sampler_calls(model, ids, mask, sampling, group):
    """``name -> zero-argument call`` that samples once with that sampler."""
    never = [model.config.vocab_size + 7]  # an EOS id no row can draw
    hf = HFSampler(model, None, HFOptions())

    def lean(fast: bool):
        return lambda: sample_lean(model, ids, mask, sampling, never, 0, group=group, fast=fast)

    return {
        "lean": lean(True),
        "lean-hf-forward": lean(False),
        "hf": lambda: hf.sample_tokens(ids, mask, sampling, never, 0, group=group),
    }


def timed(call, device: str, bf16: bool, repeats: int) -> float:
    """Median wall seconds of ``call`` (after one warm-up) under the given autocast."""
    times = []
    for _ in range(repeats + 1):
        torch.manual_seed(0)
        with torch.inference_mode(), torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            start = time.perf_counter()
            call()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:] or times)


def operator_calls(call, device: str, bf16: bool) -> tuple[int, str]:
    """Operator calls of one run, and the profiler's table of its 20 costliest operators."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        timed(call, device, bf16, repeats=0)
    events = prof.key_averages()
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    top = events.table(sort_by=key, row_limit=20)
    return sum(e.count for e in events if e.key.startswith("aten::")), top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="preset name or model folder")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from rlvr.models import resolve_model_path

    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path).to(args.device).eval()
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randint(5, 200, (args.rows // args.group, args.prompt_len), generator=generator)
    ids = prompts.repeat_interleave(args.group, dim=0).to(args.device)
    mask = torch.ones_like(ids)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=args.tokens)
    calls = sampler_calls(model, ids, mask, sampling, args.group)
    print(f"{args.model}: {args.rows} rows x {args.tokens} tokens on {args.device}")
    print("| sampler | fp32 ms/step | bf16 ms/step | bf16 / fp32 | ops/step fp32 | ops/step bf16 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    summary = []
    for name, call in calls.items():
        ms = [
            1e3 * timed(call, args.device, bf16, args.repeats) / args.tokens
            for bf16 in (False, True)
        ]
        ops = [operator_calls(call, args.device, bf16)[0] / args.tokens for bf16 in (False, True)]
        print(f"| {name} | {ms[0]:.2f} | {ms[1]:.2f} | {ms[1] / ms[0]:.2f}x "
              f"| {ops[0]:.0f} | {ops[1]:.0f} |", flush=True)  # fmt: skip
        summary.append(f"{name} {ms[0]:.2f}/{ms[1]:.2f}")
    print("\nbf16 lean, costliest operators:")
    print(operator_calls(calls["lean"], args.device, True)[1])
    print("ms/step fp32/bf16: " + ", ".join(summary))


if __name__ == "__main__":
    main()
