"""The pure parts of ``bench/vs_trl.py``: configuration mapping, summaries, the table.

Nothing here trains; the checks against TRL's own ``GRPOConfig`` skip when TRL is absent.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
from pathlib import Path

import pytest

from rlvr.objectives import GrpoConfig

BENCH = Path(__file__).resolve().parents[2] / "bench" / "vs_trl.py"


PARTS = {
    "cli": "vs_trl",
    "config": "vs_trl_config",
    "machine": "vs_trl_machine",
    "report": "vs_trl_report",
    "runs": "vs_trl_runs",
}
"""The script and the modules it is split into, by the name the tests use."""


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH.parent))  # the parts import each other and floors.py
    before = set(sys.modules)
    parts = types.SimpleNamespace(
        **{key: importlib.import_module(name) for key, name in PARTS.items()}
    )
    yield parts
    for name in set(sys.modules) - before:  # the bench's own modules, not what they imported
        if Path(getattr(sys.modules[name], "__file__", None) or "/").parent == BENCH.parent:
            sys.modules.pop(name)
    sys.path.remove(str(BENCH.parent))


def _spec(bench, **kw):
    base = dict(preset="tiny", model_dir="/models/tiny", prompts_per_step=4, group_size=4)
    return bench.config.BenchSpec(**{**base, **kw})


def test_spec_rejects_micro_batches_that_do_not_divide_the_batch(bench):
    with pytest.raises(ValueError, match="micro_batch"):
        _spec(bench, micro_batch=6)  # 16 sequences
    with pytest.raises(ValueError, match="group_size"):
        _spec(bench, group_size=1, micro_batch=4)
    with pytest.raises(ValueError, match="loss_agg"):
        _spec(bench, loss_agg="sum")
    spec = _spec(bench, micro_batch=8, steps=3, warmup=2)
    assert (spec.batch, spec.total_steps, spec.num_prompts) == (16, 5, 20)


def test_our_config_is_grpo_without_evaluation_or_checkpoints(bench):
    spec = _spec(bench, micro_batch=8, steps=3, warmup=1, max_new_tokens=32, lr=2e-6, top_k=5)
    cfg = bench.config.rlvr_config(spec, "/tmp/out")
    assert cfg.steps == 4 and cfg.threads == 1 and cfg.model.name == "/models/tiny"
    assert (cfg.objective.name, cfg.objective.loss_agg, cfg.objective.kl_coef) == (
        "grpo",
        "seq-mean-token-mean",
        0.0,
    )
    assert cfg.objective.params == GrpoConfig()  # eps_low = eps_high = 0.2, the defaults
    assert (cfg.rollout.prompts_per_step, cfg.rollout.group_size) == (4, 4)
    assert (cfg.rollout.max_new_tokens, cfg.rollout.top_k, cfg.rollout.minibatches) == (32, 5, 1)
    assert cfg.optim.micro_batch_size == 8 and cfg.optim.lr == 2e-6
    assert cfg.optim.max_grad_norm == 1.0 and cfg.optim.schedule == "constant"
    assert cfg.model.dtype == "float32" and not cfg.model.gradient_checkpointing
    assert cfg.data.eval is None and not cfg.data.shuffle
    assert cfg.data.gym.train_size == spec.num_prompts == 16
    assert not cfg.checkpoint.save_final and not cfg.log.tensorboard and not cfg.log.plots


@pytest.mark.parametrize(
    ("agg", "loss_type"),
    [
        ("seq-mean-token-mean", "grpo"),
        ("token-mean", "dapo"),
        ("seq-mean-token-sum-norm", "dr_grpo"),
    ],
)
def test_trl_arguments_match_ours(bench, agg, loss_type):
    spec = _spec(bench, micro_batch=4, loss_agg=agg, steps=2, warmup=1, max_new_tokens=48)
    kw = bench.config.trl_kwargs(spec, "/tmp/out")
    assert kw["loss_type"] == loss_type
    assert kw["per_device_train_batch_size"] == 4
    assert kw["gradient_accumulation_steps"] == kw["steps_per_generation"] == 4  # 16 / 4
    assert kw["num_generations"] == 4 and kw["max_completion_length"] == 48
    assert (kw["beta"], kw["epsilon"], kw["num_iterations"]) == (0.0, 0.2, 1)
    assert kw["max_steps"] == 3 and not kw["shuffle_dataset"] and not kw["use_vllm"]
    assert (kw["bf16"], kw["fp16"], kw["gradient_checkpointing"]) == (False, False, False)
    defaults = bench.config.trl_kwargs(spec, "/tmp/out", trl_defaults=True)
    assert not {"bf16", "fp16", "gradient_checkpointing"} & defaults.keys()


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")
def test_trl_config_generates_one_batch_per_optimiser_step(bench, tmp_path):
    trl = pytest.importorskip("trl")
    spec = _spec(bench, micro_batch=8)
    args = trl.GRPOConfig(**bench.config.trl_kwargs(spec, str(tmp_path)))
    assert args.generation_batch_size == spec.batch == 16
    assert args.steps_per_generation == args.gradient_accumulation_steps == 2
    assert not args.bf16 and not args.gradient_checkpointing
    assert args.epsilon_high is None or args.epsilon_high == 0.2
    defaults = trl.GRPOConfig(**bench.config.trl_kwargs(spec, str(tmp_path), trl_defaults=True))
    assert defaults.bf16 and defaults.gradient_checkpointing


def _result(trainer, seconds, tokens, peak):
    steps = [
        {
            "seconds": s,
            "tokens": t,
            "completions": 16,
            "longest": t / 16 + 4,
            "phases": {"generate": s / 2, "score": 0.0, "update": s / 4, "other": s / 4},
        }
        for s, t in zip(seconds, tokens, strict=True)
    ]
    return {"trainer": trainer, "steps": steps, "peak_rss_mb": peak, "setup_rss_mb": peak / 2}


def test_summary_leaves_out_warmup_and_takes_medians(bench):
    result = _result("rlvr", seconds=[9.0, 1.0, 3.0, 2.0], tokens=[999, 160, 320, 320], peak=800)
    s = bench.report.summarize(result, warmup=1)
    assert s.seconds_per_step == 2.0  # median of 1, 3, 2
    assert s.steps_per_s == 0.5
    assert s.tokens_per_s == pytest.approx(800 / 6)
    assert s.length_mean == pytest.approx(800 / 48)
    assert s.longest_mean == pytest.approx((10 + 20 + 20) / 3 + 4)  # mean of the steps' longest
    assert s.ms_per_token == pytest.approx(1000 * 6 / 800)
    assert s.phases == {"generate": 1.0, "score": 0.0, "update": 0.5, "other": 0.5}
    with pytest.raises(ValueError, match="no measured steps"):
        bench.report.summarize(result, warmup=4)


@pytest.fixture()
def earlier(bench):
    """The targets these assertions were written for (2x, half the memory, no floors)."""
    return bench.report.Targets(speed=2.0, memory=0.5, generation_floor=None, update_gemm=None)


def test_table_ratios_and_targets(bench, earlier):
    ours = bench.report.summarize(_result("rlvr", [1.0, 1.0], [320, 320], 1000), warmup=0)
    trl = bench.report.summarize(_result("trl", [2.5, 2.5], [320, 320], 2500), warmup=0)
    lines = bench.report.format_table([ours, trl])
    assert lines[0] == "|  | rlvr | trl | rlvr / trl |"
    rows = {line.split(" | ")[0].strip("| "): line for line in lines[2:]}
    assert rows["steps / s"] == "| steps / s | 1.000 | 0.400 | 2.50x |"
    assert rows["peak RSS (MiB)"] == "| peak RSS (MiB) | 1000 | 2500 | 0.40x |"
    assert rows["generate s / step"] == "|   generate s / step | 0.50 | 1.25 | 0.40x |"
    assert rows["score s / step"] == "|   score s / step | 0.00 | 0.00 | n/a |"
    per_token = (
        "  per generated token: {}x as fast (mean completion length {} vs 20.0 tokens, "
        "longest per step {} vs 24.0)"
    )
    assert bench.report.target_lines("smollm2-135m", ours, trl, earlier) == [
        "steps/s rlvr / TRL = 2.50x (target >= 2x): met",
        per_token.format("2.50", "20.0", "24.0"),
        "peak RSS rlvr / TRL = 0.40x (target <= 0.5x): met",
    ]
    # Slower per step only because its completions are twice as long: the per-token line shows it.
    slow = bench.report.summarize(_result("rlvr", [4.0, 4.0], [640, 640], 2000), warmup=0)
    assert bench.report.target_lines("tiny", slow, trl, earlier) == [
        "steps/s rlvr / TRL = 0.62x (target >= 2x): MISSED",
        per_token.format("1.25", "40.0", "44.0"),
    ]


def test_report_heading_table_and_verdicts(bench, earlier):
    spec = _spec(bench, micro_batch=8, steps=2, warmup=1)
    results = {
        "rlvr": _result("rlvr", [9.0, 1.0, 1.0], [320] * 3, 1000),
        "trl": _result("trl", [9.0, 2.0, 2.0], [320] * 3, 2000),
    }
    lines = bench.report.report("tiny", spec, results, targets=earlier)
    assert lines[0] == (
        "## tiny: 4 prompts x G=4, 64 new tokens, micro-batch 8, 1 thread(s), "
        "2 measured step(s) after 1 warm-up"
    )
    assert lines[1:3] == ["", "|  | rlvr | trl | rlvr / trl |"]
    assert "| steps / s | 1.000 | 0.500 | 2.00x |" in lines  # warm-up step left out
    assert lines[-2:] == [
        "steps/s rlvr / TRL = 2.00x (target >= 2x): met",
        "  per generated token: 2.00x as fast "
        "(mean completion length 20.0 vs 20.0 tokens, longest per step 24.0 vs 24.0)",
    ]


def test_staleness_one_row_in_the_best_table(bench, earlier):
    """rlvr-async: its own column and lines against rlvr and TRL, with both sides' waits."""
    best = _spec(bench, micro_batch=8, steps=2, warmup=1, settings="best")
    assert bench.cli.trainers_for(best, []) == ["rlvr", "rlvr-async", "trl"]
    assert bench.cli.trainers_for(_spec(bench, micro_batch=8), []) == ["rlvr", "trl"]
    gpu = _spec(bench, micro_batch=8, settings="best", device="cuda")
    assert bench.cli.trainers_for(gpu, ["trl-defaults"]) == ["rlvr", "trl", "trl-defaults"]
    stale = _result("rlvr-async", [9.0, 0.8, 0.8], [320] * 3, 1500)
    for step, wait in zip(stale["steps"], [5.0, 0.1, 0.3], strict=True):
        step["worker"] = {"generate": 0.6, "score": 0.0, "wait_update": wait}
    results = {
        "rlvr": _result("rlvr", [9.0, 1.0, 1.0], [320] * 3, 1000),
        "rlvr-async": stale,
        "trl": _result("trl", [9.0, 2.0, 2.0], [320] * 3, 2000),
    }
    lines = bench.report.report("tiny", best, results, targets=earlier)
    assert "|  | rlvr | rlvr-async | trl | rlvr / rlvr-async | rlvr / trl |" in lines
    assert lines[-3:] == [
        "steps/s rlvr-async / rlvr = 1.25x (target >= 1.4x): MISSED",
        "steps/s rlvr-async / TRL = 2.50x (target >= 2.8x): MISSED",
        "  waits per step (median): trainer on generation 0.40 s, worker on weights 0.20 s; "
        "the worker's own generation 0.60 s",
    ]
    assert bench.config.rlvr_config(best, "/tmp/out", staleness=1).rollout.staleness == 1


def test_children_run_offline_with_pinned_threads(bench):
    env = bench.runs.child_env(threads=2)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert env["PYTHONPATH"].split(":")[0] == str(BENCH.parents[1] / "src")


def test_trainers_must_sample_the_same_prompts(bench):
    spec = _spec(bench, micro_batch=8, steps=2, warmup=1)  # 12 prompts
    same = {
        "rlvr": {"prompts_used": 12, "prompt_hash": "a"},
        "trl": {"prompts_used": 12, "prompt_hash": "a"},
    }
    bench.runs.check_same_prompts(spec, same)
    with pytest.raises(RuntimeError, match="different prompts"):
        bench.runs.check_same_prompts(
            spec, {**same, "trl": {"prompts_used": 12, "prompt_hash": "b"}}
        )
    with pytest.raises(RuntimeError, match="expected 12 prompts"):
        bench.runs.check_same_prompts(
            spec, {**same, "trl": {"prompts_used": 16, "prompt_hash": "a"}}
        )


def test_steps_default_per_preset_unless_given(bench):
    args = bench.cli.parse_args([])
    assert args.presets == ["tiny", "smollm2-135m"] and args.warmup == 1
    assert [bench.cli.steps_for(args, p) for p in args.presets] == [20, 3]
    assert bench.cli.steps_for(bench.cli.parse_args(["--steps", "5"]), "smollm2-135m") == 5


def test_default_targets_with_floors(bench):
    ours = bench.report.summarize(_result("rlvr", [1.0, 1.0], [320, 320], 1000), warmup=0)
    trl = bench.report.summarize(_result("trl", [2.4, 2.4], [320, 320], 2000), warmup=0)
    ours = dataclasses.replace(
        ours, floor_shares={"generate": 0.65, "update": 0.7, "update_gemm": 0.79}
    )
    lines = bench.report.target_lines("smollm2-135m", ours, trl)
    assert lines[0] == "steps/s rlvr / TRL = 2.40x (target >= 2.5x): MISSED"
    assert lines[2:] == [
        "peak RSS rlvr / TRL = 0.50x (target <= 0.6x): met",
        "generation at 65% of its floor (target >= 60%): met",
        "update at 79% of the GEMM rate (target >= 80%): MISSED",
    ]
    assert len(bench.report.target_lines("tiny", ours, trl)) == 2  # memory and floors: smollm2 only


def test_floor_shares_from_the_steps(bench):
    from floors import ModelShape, Rates, StepWork, generation_floor, update_floor, update_flops

    shape = ModelShape(
        layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, params=100
    )
    rates = bench.machine.Rates(gemm_flops=1e4, read_bytes=1e3)
    result = _result("rlvr", [4.0, 4.0], [320, 320], 1000)
    for step in result["steps"]:
        step["prompt_lengths"] = [5, 7, 6, 6]
    s = bench.report.summarize(result, warmup=0, floors=bench.machine.Floors(shape, rates))
    work = StepWork((5, 7, 6, 6), 16, 320, 24)
    assert s.floor_shares["generate"] == pytest.approx(generation_floor(shape, work, rates) / 2.0)
    assert s.floor_shares["update"] == pytest.approx(update_floor(shape, work, rates) / 1.0)
    assert s.floor_shares["update_gemm"] == pytest.approx(update_flops(shape, work) / 1e4)
    table = bench.report.format_table([s, s])
    assert any(line.startswith("|   update: FLOP rate / GEMM rate |") for line in table)
    assert isinstance(rates, Rates)


def test_best_settings(bench, monkeypatch):
    spec = _spec(bench, micro_batch=8)
    monkeypatch.setattr(bench.config, "native_bf16", lambda: False)
    best = bench.config.with_settings(spec, "best")
    assert (best.settings, best.gradient_checkpointing, best.bf16) == ("best", True, False)
    cfg = bench.config.rlvr_config(best, "/tmp/out")
    assert cfg.model.gradient_checkpointing and cfg.model.autocast == "none"
    kw = bench.config.trl_kwargs(best, "/tmp/out")
    assert (kw["bf16"], kw["gradient_checkpointing"]) == (False, True)
    assert "each trainer at its best: gradient checkpointing, fp32" in bench.report.heading(
        "tiny", best
    )
    monkeypatch.setattr(bench.config, "native_bf16", lambda: True)
    best = bench.config.with_settings(spec, "best")
    assert best.bf16 and bench.config.rlvr_config(best, "/tmp/out").model.autocast == "bf16"
    equal = bench.config.with_settings(best, "equal")
    assert (equal.gradient_checkpointing, equal.bf16) == (False, False)
    with pytest.raises(ValueError, match="settings"):
        _spec(bench, micro_batch=8, settings="fastest")


def test_gpu_vllm_configuration(bench):
    from rlvr.generation import available_samplers

    spec = _spec(bench, micro_batch=8, device="cuda", sampler="vllm")
    if "vllm" in available_samplers():  # rlvr's vLLM sampler is an optional module
        cfg = bench.config.rlvr_config(spec, "/tmp/out")
        assert cfg.model.device == "cuda" and cfg.rollout.sampler == "vllm"
    kw = bench.config.trl_kwargs(spec, "/tmp/out")
    assert kw["use_vllm"] and kw["vllm_mode"] == "colocate" and not kw["use_cpu"]
    assert "cuda, sampler vllm" in bench.report.heading("smollm2-135m", spec)


def test_threads_default_to_one_and_all_cores(bench):
    import os

    assert bench.cli.parse_args([]).threads == sorted({1, os.cpu_count() or 1})
    assert bench.cli.parse_args(["--threads", "2"]).threads == [2]
    assert bench.cli.parse_args([]).settings == ["equal"]


def test_busy_cores_warning(bench, monkeypatch):
    from floors import ModelShape

    shape = ModelShape(
        layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, params=100
    )
    single = bench.machine.Rates(gemm_flops=90e9, read_bytes=1e10)
    monkeypatch.setattr(bench.machine, "measure_rates", lambda shape, threads: single)
    busy = bench.machine.Floors(shape, bench.machine.Rates(gemm_flops=95e9, read_bytes=1e10))
    assert bench.machine.busy_cores_line(busy, 1) is None  # nothing to compare at one thread
    line = bench.machine.busy_cores_line(busy, 2)
    assert line.startswith("WARNING: the GEMM rate at 2 threads is 1.06x the 1-thread rate")
    free = bench.machine.Floors(shape, bench.machine.Rates(gemm_flops=160e9, read_bytes=1e10))
    assert bench.machine.busy_cores_line(free, 2) is None


def test_decode_ceiling_line(bench):
    line = bench.machine.decode_ceiling_line(16, 31.1e9, 84.6e9)
    assert line.startswith("  decoding's matrix products at 16 rows run at 31.1 GFLOP/s, 37% of")


def test_decode_ceiling_measures_at_the_steps_rows(bench, monkeypatch):
    from floors import ModelShape

    shape = ModelShape(
        layers=2, hidden=8, intermediate=16, heads=2, kv_heads=1, head_dim=4, vocab=10, params=100
    )
    seen = {}

    def fake_rates(shape_, rows, threads):
        seen.update(shape=shape_, rows=rows, threads=threads)
        return {"reused": 1.0, "streamed": 20e9}

    monkeypatch.setattr(bench.machine, "product_rates", fake_rates)
    floors = bench.machine.Floors(shape, bench.machine.Rates(gemm_flops=80e9, read_bytes=1e10))
    line = bench.machine.decode_ceiling(
        _spec(bench, prompts_per_step=4, group_size=8, threads=2), floors
    )
    assert seen == {"shape": shape, "rows": 32, "threads": 2}
    assert "at 32 rows run at 20.0 GFLOP/s, 25% of that GEMM rate" in line
