"""Where a decoding step's time goes, fp32 against bfloat16 autocast, per sampler.

    python bench/gpu/decode_profile.py --model tiny --device cuda
    python bench/gpu/decode_profile.py --model PATH --device cuda --rows 128 --tokens 64
    python bench/gpu/decode_profile.py --model PATH --samplers lean --tokens 32 --repeats 1
    python bench/gpu/decode_profile.py --model PATH --samplers lean --modes bf16-no-cudnn --weights lora

Samples ``rows`` completions (``group`` per prompt) with ``lean`` (its Llama-family
decoder), ``lean`` through the Hugging Face forward (``fast=False``) and ``hf``
(``model.generate``), each in fp32, under bf16 autocast, and under bf16 autocast with
attention kept off cuDNN (what samplers' ``generate`` does,
:func:`rlvr.generation.base.varying_shape_attention`);
prints milliseconds per decoding step (median of ``--repeats``, each with its own seed) and
the operator calls per step. A sixteenth of the vocabulary ends a row, so rows finish at
different steps and ``lean`` drops them from the batch, as in training: every run meets
shapes the previous ones did not. The operator counts come from one profiled run per mode;
the first sampler's profiled run under bf16 with attention off cuDNN (the samplers' own
setting) also gives its 20 costliest operators. bench/gpu/check.py runs it as its ``decode`` section
(tiny preset), and ``lean`` alone on the Qwen2-shaped model as its ``qwen-decode`` section.

``--weights`` says what the model's weights are: ``trainable`` (a full-weight run's),
``frozen`` (no gradient, as the base of a LoRA run) or ``lora`` (frozen, with rank-16
adapters on every linear layer, their B random, as a LoRA run samples). Autocast keeps its
bf16 copy of a float32 weight for a whole pass only when the weight requires gradients and
never in inference mode (where samplers run), so ``lean``'s decoder casts its weights itself,
once per batch; the three show whether a decoding step costs the same with each
(``check.py``'s ``lora`` section runs them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch
from torch.nn.attention import sdpa_kernel

from rlvr.generation.base import VARYING_SHAPE_ATTENTION, SamplingConfig, no_gradients
from rlvr.generation.hf import HFOptions, HFSampler
from rlvr.generation.lean import sample_lean


def sampler_calls(model, ids, mask, sampling, group):
    """``name -> zero-argument call`` that samples once with that sampler."""
    ends = list(range(3, model.config.vocab_size, 16))  # EOS ids: a sixteenth of the vocabulary
    hf = HFSampler(model, None, HFOptions())

    def lean(fast: bool):
        return lambda: sample_lean(model, ids, mask, sampling, ends, 0, group=group, fast=fast)

    return {
        "lean": lean(True),
        "lean-hf-forward": lean(False),
        "hf": lambda: hf.sample_tokens(ids, mask, sampling, ends, 0, group=group),
    }


MODES = ("fp32", "bf16", "bf16-no-cudnn")
SAMPLERS = ("lean", "lean-hf-forward", "hf")


def context(device: str, mode: str) -> contextlib.ExitStack:
    """``mode``'s autocast and attention kernels, and gradients off as the samplers' own
    ``generate`` turns them off (:func:`rlvr.generation.base.no_gradients`)."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch.autocast(device, dtype=torch.bfloat16, enabled=mode != "fp32"))
    stack.enter_context(no_gradients(torch.device(device)))
    if mode == "bf16-no-cudnn":
        stack.enter_context(sdpa_kernel(list(VARYING_SHAPE_ATTENTION)))
    return stack


def timed(call, device: str, mode: str, repeats: int) -> tuple[float, float]:
    """Median wall seconds of ``call`` (after one warm-up; run ``r`` seeded with ``r``) and
    the mean number of tokens per row it sampled."""
    times, lengths = [], []
    for seed in range(repeats + 1):
        torch.manual_seed(seed)
        with context(device, mode):
            start = time.perf_counter()
            tokens = call()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            lengths.append(tokens.shape[1])
    return statistics.median(times[1:] or times), statistics.mean(lengths)


def operator_calls(call, device: str, mode: str) -> tuple[int, str]:
    """Operator calls of one run, and the profiler's table of its 20 costliest operators."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        timed(call, device, mode, repeats=0)
    events = prof.key_averages()
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    top = events.table(sort_by=key, row_limit=20)
    return sum(e.count for e in events if e.key.startswith("aten::")), top


WEIGHTS = ("trainable", "frozen", "lora")


def set_weights(model, weights: str) -> None:
    """Make ``model``'s weights ``trainable``, ``frozen`` or ``lora`` (see the module docstring)."""
    model.requires_grad_(weights == "trainable")
    if weights == "lora":
        from rlvr.train.config import LoraConfig
        from rlvr.train.lora import add_adapters

        add_adapters(model, LoraConfig(rank=16))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if ".lora_B." in name:
                    p.normal_(0, 0.01, generator=torch.Generator(p.device).manual_seed(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="preset name or model folder")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--weights", choices=WEIGHTS, default="trainable")
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM

    from rlvr.models import resolve_model_path

    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path).to(args.device).eval()
    set_weights(model, args.weights)
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randint(5, 200, (args.rows // args.group, args.prompt_len), generator=generator)
    ids = prompts.repeat_interleave(args.group, dim=0).to(args.device)
    mask = torch.ones_like(ids)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=args.tokens)
    calls = sampler_calls(model, ids, mask, sampling, args.group)
    calls = {name: call for name, call in calls.items() if name in args.samplers}
    modes = args.modes
    print(
        f"{args.model} ({args.weights}): {args.rows} rows x {args.tokens} tokens on {args.device}"
    )
    print("| sampler | " + " | ".join(f"{m} ms/step" for m in modes) + " | steps run | ops/step |")
    print("| --- |" + " ---: |" * (len(modes) + 2))
    summary, top = [], ""
    for name, call in calls.items():
        runs = [timed(call, args.device, mode, args.repeats) for mode in modes]
        ms = [1e3 * seconds / steps for seconds, steps in runs]
        profiled = [operator_calls(call, args.device, mode) for mode in modes]
        ops = [count / runs[i][1] for i, (count, _) in enumerate(profiled)]
        top = top or profiled[-1][1]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in ms)
              + f" | {runs[0][1]:.0f} | " + " / ".join(f"{v:.0f}" for v in ops) + " |", flush=True)  # fmt: skip
        summary.append(f"{name} " + "/".join(f"{v:.2f}" for v in ms))
    print(f"\n{modes[-1]} {next(iter(calls))}, costliest operators:")
    print(top)
    print("ms/step " + "/".join(modes) + ": " + ", ".join(summary))


if __name__ == "__main__":
    main()
