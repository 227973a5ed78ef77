"""``bench/floors.py``: FLOP counts and floors, hand-worked."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FLOORS = Path(__file__).resolve().parents[2] / "bench" / "floors.py"


@pytest.fixture(scope="module")
def floors():
    spec = importlib.util.spec_from_file_location("floors", FLOORS)
    module = importlib.util.module_from_spec(spec)
    sys.modules["floors"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("floors", None)


def shape(floors, **kw):
    base = dict(
        layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, params=1000
    )
    return floors.ModelShape(**{**base, **kw})


def test_flop_counts_hand_worked(floors):
    s = shape(floors)
    # per layer: q 8x8, k 8x4, v 8x4, o 8x8, mlp 3 x 8x16 = 64 + 32 + 32 + 64 + 384 = 576
    assert s.position_flops == 2 * 2 * 576
    assert s.head_flops == 2 * 8 * 10
    assert s.pair_flops == 4 * 2 * 2 * 4
    assert s.weight_bytes == 4000


def test_config_shape_from_a_llama_config(floors):
    from transformers import LlamaConfig

    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=50,
    )
    s = floors.ModelShape.from_config(config, params=123)
    assert (s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, s.vocab) == (3, 64, 4, 2, 16, 50)


def test_work_pairs(floors):
    work = floors.StepWork(prompt_lengths=(3, 2), completions=4, generated=10, longest=4)
    assert work.prompt_pairs() == 6 + 3
    # 10 response tokens, each sees at least the shorter prompt (2) and on average half
    # of a 10 / 4 = 2.5-token completion: 10 * 2 + (100 // 4 + 10) // 2 = 20 + 17
    assert work.response_pairs() == 37


def test_floors_hand_worked(floors):
    s = shape(floors)
    work = floors.StepWork(prompt_lengths=(3, 2), completions=4, generated=10, longest=4)
    rates = floors.Rates(gemm_flops=1000.0, read_bytes=200.0)
    prefill, decode = floors.generation_flops(s, work)
    assert prefill == 5 * 2304 + 2 * 160 + 9 * 64
    assert decode == 6 * (2304 + 160) + 37 * 64  # 10 tokens, the first of each from prefill
    # three decoding steps, each reading 4000 bytes at 200 bytes/s: 60 s, more than the
    # decode FLOPs take (17.2 s); at 20x the bandwidth the FLOPs bound it instead
    assert floors.generation_floor(s, work, rates) == pytest.approx(prefill / 1000 + 60.0)
    fast = floors.Rates(gemm_flops=1000.0, read_bytes=4000.0)
    assert floors.generation_floor(s, work, fast) == pytest.approx((prefill + decode) / 1000)
    forward = 15 * 2304 + 10 * 160 + (9 + 37) * 64
    assert floors.update_flops(s, work) == 3 * forward
    optimizer = 1000 * 32 / 200
    assert floors.update_floor(s, work, rates) == pytest.approx(3 * forward / 1000 + optimizer)


def test_measured_rates_are_positive(floors):
    rates = floors.measure_rates(shape(floors, hidden=32, intermediate=64), 1, rows=16, repeats=1)
    assert rates.gemm_flops > 0 and rates.read_bytes > 0
