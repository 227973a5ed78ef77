"""The matrix products of one decoding step: how fast they run when the weights come from memory.

    PYTHONPATH=src python bench/decode_gemm.py                    # smollm2-135m, 16 rows, 1 thread
    PYTHONPATH=src python bench/decode_gemm.py --threads 2 --rows 8 32

A decoding step multiplies a few rows (one per sequence still running) by every weight of
the model once. ``bench/floors.py`` prices it at the larger of its FLOPs over the GEMM
rate (measured at 512 rows) and its weight bytes over the read bandwidth. This measures
what torch's fp32 GEMM actually does with those shapes, in the same run:

- ``reused``: one layer's weights for every layer, so they stay in the CPU's caches as
  far as they fit (the LM head, 49152 x 576 for SmolLM2, does not);
- ``streamed``: every layer's products with distinct random weights of the model's
  shapes (the whole model, plus the LM head), as a decoding step meets them: each weight
  comes from memory once.

Each product is ``W @ x.T`` (``W`` ``[out, in]``, ``x`` ``[rows, in]``), the layout the lean
decoder uses. The ratio ``streamed / 512-row rate`` is the most of the generation floor a
decoder built on these products can reach, before attention, sampling and the rest.

``--inductor`` adds a third column: the streamed products compiled by ``torch.compile``
with ``max_autotune`` and ``freezing``, so that Inductor may pick its own C++ GEMM
micro-kernels over torch's, with the weights packed once as constants. A trainer cannot
do this (its weights change at every optimiser step, and the compile takes a minute or
two); the column says how much a better small-row kernel would give.

``--onednn`` adds the streamed products through oneDNN's fp32 linear with each weight
packed once for the given rows (``torch.ops.mkldnn._reorder_linear_weight``), as a
sampler could pack them once per rollout step; its outputs are checked against torch's
to float tolerance (they are not bit-identical).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from floors import ModelShape, _best_seconds, measure_rates  # noqa: E402


def layer_shapes(shape: ModelShape) -> list[tuple[int, int]]:
    """``(out, in)`` of one decoder layer's projections: q, k, v, o, gate, up, down."""
    h, d = shape.hidden, shape.head_dim
    return [
        (shape.heads * d, h),
        (shape.kv_heads * d, h),
        (shape.kv_heads * d, h),
        (h, shape.heads * d),
        (shape.intermediate, h),
        (shape.intermediate, h),
        (h, shape.intermediate),
    ]


def step_flops(shape: ModelShape, rows: int) -> int:
    """FLOPs of one decoding step's products over ``rows`` rows (layers and head), counted
    as ``bench/floors.py`` counts a position."""
    return rows * (shape.position_flops + shape.head_flops)


def product_rates(shape: ModelShape, rows: int, threads: int, repeats: int = 3) -> dict[str, float]:
    """FLOP/s of one decoding step's products: one layer's weights ``reused``, or all ``streamed``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        inputs = {i: torch.randn(rows, i) for _, i in layer_shapes(shape)}  # the hidden size too
        one_layer = [torch.randn(o, i) for o, i in layer_shapes(shape)]
        model = [torch.randn(o, i) for _ in range(shape.layers) for o, i in layer_shapes(shape)]
        model.append(torch.randn(shape.vocab, shape.hidden))
        head = model[-1]

        def reused():
            for _ in range(shape.layers):
                for w in one_layer:
                    torch.mm(w, inputs[w.shape[1]].T)
            torch.mm(head, inputs[shape.hidden].T)

        def streamed():
            for w in model:
                torch.mm(w, inputs[w.shape[1]].T)

        flops = step_flops(shape, rows)
        return {
            "reused": flops / _best_seconds(reused, repeats),
            "streamed": flops / _best_seconds(streamed, repeats),
        }
    finally:
        torch.set_num_threads(previous)


def inductor_rate(shape: ModelShape, rows: int, threads: int, repeats: int = 3) -> float:
    """FLOP/s of the streamed products compiled by Inductor with frozen, pre-packed weights."""
    import torch._inductor.config as inductor

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    products = torch.nn.ModuleList(
        torch.nn.Linear(i, o, bias=False)
        for _ in range(shape.layers)
        for o, i in layer_shapes(shape)
    )
    products.append(torch.nn.Linear(shape.hidden, shape.vocab, bias=False))
    inputs = {i: torch.randn(rows, i) for _, i in layer_shapes(shape)}

    def step(xs: dict[int, torch.Tensor]) -> list[torch.Tensor]:
        return [p(xs[p.in_features]) for p in products]

    try:
        with inductor.patch(max_autotune=True, freezing=True), torch.no_grad():
            compiled = torch.compile(step)
            for got, want in zip(compiled(inputs), step(inputs), strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)  # the same products
            return step_flops(shape, rows) / _best_seconds(lambda: compiled(inputs), repeats)
    finally:
        torch.set_num_threads(previous)


def onednn_rate(shape: ModelShape, rows: int, threads: int, repeats: int = 3) -> float:
    """FLOP/s of the streamed products through oneDNN's linear with weights packed for ``rows``."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        weights = [torch.randn(o, i) for _ in range(shape.layers) for o, i in layer_shapes(shape)]
        weights.append(torch.randn(shape.vocab, shape.hidden))
        inputs = {i: torch.randn(rows, i) for _, i in layer_shapes(shape)}
        packed = [torch.ops.mkldnn._reorder_linear_weight(w, rows) for w in weights]

        def product(k: int) -> torch.Tensor:
            x = inputs[weights[k].shape[1]]
            return torch.ops.mkldnn._linear_pointwise(x, packed[k], None, "none", [], "")

        for k in (0, len(weights) - 1):  # a layer's product and the head: the same values
            want = torch.mm(inputs[weights[k].shape[1]], weights[k].T)
            torch.testing.assert_close(product(k), want, rtol=1e-4, atol=1e-3)

        def streamed():
            for k in range(len(weights)):
                product(k)

        return step_flops(shape, rows) / _best_seconds(streamed, repeats)
    finally:
        torch.set_num_threads(previous)


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoConfig

    from rlvr.models import resolve_model_path

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", default="smollm2-135m", help="preset or local model directory")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, nargs="+", default=[16])
    p.add_argument(
        "--inductor", action="store_true", help="add the products compiled with frozen weights"
    )
    p.add_argument(
        "--onednn", action="store_true", help="add oneDNN's linear with weights packed per rows"
    )
    args = p.parse_args(argv)
    config = AutoConfig.from_pretrained(resolve_model_path(args.preset))
    # Only the weights a decoding step multiplies (layers' projections and the head) count.
    shape = ModelShape.from_config(config, params=0)
    products = step_flops(shape, rows=1) // 2
    shape = ModelShape.from_config(config, params=products)
    rates = measure_rates(shape, args.threads)
    print(
        f"{args.preset}, {args.threads} thread(s): fp32 GEMM {rates.gemm_flops / 1e9:.1f} GFLOP/s "
        f"at 512 rows, memory read {rates.read_bytes / 1e9:.1f} GB/s"
    )
    columns = [("inductor, frozen", inductor_rate)] * args.inductor
    columns += [("onednn, packed", onednn_rate)] * args.onednn
    extra = "".join(
        f" {name} GFLOP/s | {name.split(',')[0]} / 512-row rate |" for name, _ in columns
    )
    print(
        "| rows | reused GFLOP/s | streamed GFLOP/s | streamed / 512-row rate | "
        f"weight bytes/s streamed |{extra}"
    )
    print("| ---: | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * len(columns))
    for rows in args.rows:
        r = product_rates(shape, rows, args.threads)
        seconds = step_flops(shape, rows) / r["streamed"]
        line = (
            f"| {rows} | {r['reused'] / 1e9:.1f} | {r['streamed'] / 1e9:.1f} | "
            f"{r['streamed'] / rates.gemm_flops:.0%} | "
            f"{shape.weight_bytes / seconds / 1e9:.1f} GB/s |"
        )
        for _, measure in columns:
            rate = measure(shape, rows, args.threads)
            line += f" {rate / 1e9:.1f} | {rate / rates.gemm_flops:.0%} |"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
