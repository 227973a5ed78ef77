"""``bench/decode_gemm.py``: the decoding step's product count, hand-worked, and its rates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def decode_gemm():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("decode_gemm", BENCH / "decode_gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCH))
    sys.modules.pop("floors", None)


def small(decode_gemm):
    return decode_gemm.ModelShape(
        layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, params=1
    )


def test_step_flops_hand_worked(decode_gemm):
    # per layer: q 8x8, k 4x8, v 4x8, o 8x8, gate/up 16x8 each, down 8x16 = 576; head 10x8
    assert decode_gemm.step_flops(small(decode_gemm), rows=3) == 2 * 3 * (2 * 576 + 80)


def test_layer_shapes_chain(decode_gemm):
    shapes = decode_gemm.layer_shapes(small(decode_gemm))
    assert shapes == [(8, 8), (4, 8), (4, 8), (8, 8), (16, 8), (16, 8), (8, 16)]


def test_product_rates_are_positive_and_finite(decode_gemm):
    rates = decode_gemm.product_rates(small(decode_gemm), rows=4, threads=1, repeats=1)
    assert set(rates) == {"reused", "streamed"}
    assert all(0 < r < float("inf") for r in rates.values())


@pytest.mark.slow  # an Inductor compile: ~10 s, ~30 s with a cold compile cache
def test_inductor_rate_checks_its_products_and_is_positive(decode_gemm):
    rate = decode_gemm.inductor_rate(small(decode_gemm), rows=4, threads=1, repeats=1)
    assert 0 < rate < float("inf")


def test_onednn_rate_checks_its_products_and_is_positive(decode_gemm):
    rate = decode_gemm.onednn_rate(small(decode_gemm), rows=4, threads=1, repeats=1)
    assert 0 < rate < float("inf")
