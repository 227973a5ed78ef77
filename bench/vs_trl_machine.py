"""``bench/vs_trl.py``'s machine: CPU detection, the measured rates and the floors they give."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decode_gemm import product_rates
from floors import (
    ModelShape,
    Rates,
    StepWork,
    generation_floor,
    measure_rates,
    update_floor,
    update_flops,
)
from host import cpu_model
from vs_trl_config import BenchSpec, native_bf16


def machine_line() -> str:
    """CPU model, core count, native bf16 and the 1/5/15-minute load averages."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    bf16 = "native bf16" if native_bf16() else "no native bf16"
    return f"machine: {cpu_model()}, {os.cpu_count()} cores (nproc), {bf16}, load average {load}"


@dataclass(frozen=True)
class Floors:
    """What the floors of a preset need: the model's shape and the machine's rates."""

    shape: ModelShape
    """The model."""
    rates: Rates
    """Measured at the run's thread count."""

    def shares(self, steps: list[dict[str, Any]]) -> dict[str, float]:
        """Floor / time of generation and update, and the update's FLOP rate / GEMM rate."""
        works = [
            StepWork(
                tuple(s["prompt_lengths"]), s["completions"], int(s["tokens"]), int(s["longest"])
            )
            for s in steps
        ]
        gen = sum(s["phases"]["generate"] for s in steps)
        upd = sum(s["phases"]["update"] for s in steps)
        gen_floor = sum(generation_floor(self.shape, w, self.rates) for w in works)
        upd_floor = sum(update_floor(self.shape, w, self.rates) for w in works)
        upd_flops = sum(update_flops(self.shape, w) for w in works)
        return {
            "generate": gen_floor / gen if gen else 0.0,
            "update": upd_floor / upd if upd else 0.0,
            "update_gemm": upd_flops / upd / self.rates.gemm_flops if upd else 0.0,
        }


def preset_floors(spec: BenchSpec) -> Floors:
    """The model's shape and the machine's rates at ``spec.threads``, measured now."""
    from safetensors import safe_open
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(spec.model_dir)
    params = 0
    with safe_open(str(Path(spec.model_dir) / "model.safetensors"), "pt") as f:
        for key in f.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
            params += math.prod(f.get_slice(key).get_shape())
    shape = ModelShape.from_config(config, params)
    return Floors(shape, measure_rates(shape, spec.threads))


def rates_line(floors: Floors, threads: int) -> str:
    """The measured rates the floors use."""
    r = floors.rates
    return (
        f"measured at {threads} thread(s): fp32 GEMM {r.gemm_flops / 1e9:.1f} GFLOP/s on the "
        f"model's layer shapes, memory read {r.read_bytes / 1e9:.1f} GB/s"
    )


BUSY_SCALING = 1.3
"""Below this GEMM rate at N threads over the rate at 1 thread, the cores were not free."""


def busy_cores_line(floors: Floors, threads: int) -> str | None:
    """A warning when the GEMM rate at ``threads`` barely exceeds the 1-thread rate measured
    now (other work held the cores, so this thread count's timings are suspect)."""
    if threads <= 1:
        return None
    single = measure_rates(floors.shape, 1).gemm_flops
    scaling = floors.rates.gemm_flops / single
    if scaling >= BUSY_SCALING:
        return None
    return (
        f"WARNING: the GEMM rate at {threads} threads is {scaling:.2f}x the 1-thread rate "
        f"({single / 1e9:.1f} GFLOP/s): the cores were not free, so the timings at "
        f"{threads} threads are suspect; run again on an idle machine"
    )


def decode_ceiling_line(rows: int, decode_flops: float, gemm_flops: float) -> str:
    """The rate of decoding's products at ``rows`` rows as a share of the floor's GEMM rate."""
    return (
        f"  decoding's matrix products at {rows} rows run at {decode_flops / 1e9:.1f} GFLOP/s, "
        f"{decode_flops / gemm_flops:.0%} of that GEMM rate (all weights streamed; "
        "bench/decode_gemm.py): the most of the generation floor a decoder built on them reaches"
    )


def decode_ceiling(spec: BenchSpec, floors: Floors) -> str:
    """:func:`decode_ceiling_line` measured now, at the step's completions as rows."""
    rows = spec.prompts_per_step * spec.group_size
    streamed = product_rates(floors.shape, rows, spec.threads)["streamed"]
    return decode_ceiling_line(rows, streamed, floors.rates.gemm_flops)
