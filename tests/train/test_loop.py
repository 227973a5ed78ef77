import dataclasses
import json
import math
import os
import shutil
import signal
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlvr.train.checkpoint import list_checkpoints
from rlvr.train.harness import Callback
from rlvr.train.loop import build_run, train
from rlvr.train.metrics import MetricsWriter, read_metrics

ALWAYS = [
    "reward/mean",
    "reward/std",
    "reward/accuracy",
    "response/length_mean",
    "response/length_max",
    "response/clipped_frac",
    "response/empty_frac",
    "groups/identical_frac",
    "verifier/failures",
    "time/generate",
    "time/score",
    "time/step",
    "perf/tokens_per_s",
    "data/prompts_skipped",
]
UPDATE = [
    "loss/policy",
    "policy/entropy",
    "optim/grad_norm",
    "optim/lr",
    "time/update",
    "clip/frac",
    "kl/old_approx",
]
VOLATILE = ("time/", "perf/")


def _stable(rows):
    """Rows without wall-clock metrics (the only ones a resumed run may change)."""
    return [
        json.dumps({k: v for k, v in r.items() if not k.startswith(VOLATILE)}, sort_keys=True)
        for r in rows
    ]


def test_held_out_scores_are_shown_when_measured(train_config, capsys):
    train(train_config("steps=2", "eval.every=2", "eval.at_start=true", "log.progress=auto"))
    err = capsys.readouterr().err
    # each number once: avg@n (n = 2 here) stands for every avg@k, pass@1 is avg@1
    assert "held-out before training: avg@2" in err and "held-out at step 2: avg@2" in err
    assert "pass@1" not in err and "avg@1" not in err


def test_train_writes_finite_metrics_every_step(train_config):
    result = train(train_config("steps=3", "eval.at_end=true", "eval.at_start=true"))
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]  # step 0: held-out before training
    for row in rows[1:]:
        assert "log/nonfinite_metrics" not in row
        assert "perf/peak_gpu_mb" not in row  # logged on CUDA only (tests/test_cuda.py)
        for name in ALWAYS:
            assert math.isfinite(row[name]), name
        if row["update/skipped"] == 0:
            for name in UPDATE:
                assert math.isfinite(row[name]), name
    assert "eval/avg@1" in rows[0] and "eval/avg@1" in rows[-1] and sorted(result.evals) == [0, 3]
    samples = [
        json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()
    ]
    assert [s["step"] for s in samples] == [1, 1, 2, 2, 3, 3]
    assert {"prompt", "completion", "reward", "reference"} <= set(samples[0])
    assert result.model_dir is not None and (result.model_dir / "trainer_state.pt").exists()
    assert any("held-out" in line for line in result.summary_lines())
    gain = 100 * (result.evals[3]["avg@1"] - result.evals[0]["avg@1"])
    assert result.change_points()["avg@1"] == pytest.approx(gain)
    assert f"avg@2 {gain:+.1f} pts" in result.summary_lines()[2]  # avg@2 is avg@1, shown once


def test_each_held_out_evaluation_writes_its_report_and_the_change_has_an_interval(train_config):
    """The per-problem results of a run's evaluations were lost with the run, and its
    held-out change had no interval: each is now <run>/eval_reports/step_N.json in rlvr eval's
    format, and the summary pairs the first with the last by problem."""
    from rlvr.evaluation.paired import paired_differences, read_report

    cfg = train_config("steps=3", "eval.every=2", "eval.at_start=true", "eval.at_end=true")
    result = train(cfg)
    files = sorted(p.name for p in (result.run_dir / "eval_reports").iterdir())
    assert files == ["step_000000.json", "step_000002.json", "step_000003.json"]
    for step in (0, 2, 3):
        report = read_report(result.run_dir / "eval_reports" / f"step_{step:06d}.json")
        problems = report["problems"]
        assert report["step"] == step and report["verifier"] == "even"
        assert report["verifier_options"] == {"correct": 1.0, "wrong": 0.0}
        assert report["metrics"]["avg@1"] == result.evals[step]["avg@1"]
        assert sum(p["c"] / p["n"] for p in problems) / len(problems) == pytest.approx(
            result.evals[step]["avg@1"], abs=1e-12
        )
        assert all(p["n"] == 2 and p["completions"] == [] for p in problems)
    first, last = (
        read_report(result.run_dir / "eval_reports" / f"step_{s:06d}.json") for s in (0, 3)
    )
    expected = paired_differences(last, first, ks=[1])
    assert result.change_intervals == expected and set(expected) >= set(result.change_points())
    # the policy's weights fingerprinted (trained: other weights) and how it computed
    assert first["weights"]["sha256"] != last["weights"]["sha256"]
    assert first["loading"] == {"template": None, "dtype": "float32", "autocast": "none"}
    assert first["prompts"] == last["prompts"] and first["prompts"]["chat_template"] is True
    d, gain = expected["avg@1"], result.change_points()["avg@1"]
    assert 100 * d.mean == pytest.approx(gain, abs=1e-9)
    line = next(x for x in result.summary_lines() if x.startswith("held-out change:"))
    assert f"avg@2 {gain:+.1f} pts [{100 * d.low:+.1f}, {100 * d.high:+.1f}]" in line
    assert line.endswith(f"(95%, paired over {len(first['problems'])} problems)")


def test_a_runs_reports_record_the_time_limit_it_scored_with(train_config):
    """The reports said timeout_s 10.0 and workers 1 (the harness's defaults) whatever
    reward.timeout_s and reward.workers the run scored with; rlvr eval --against compares the
    reports' time limits, so it would have compared the wrong one."""
    cfg = train_config("steps=1", "eval.at_end=true", "reward.timeout_s=7.5")
    report = json.loads((train(cfg).run_dir / "eval_reports" / "step_000001.json").read_text())
    assert report["config"]["scoring"]["timeout_s"] == 7.5
    assert report["config"]["scoring"]["workers"] == cfg.reward.workers == 0


def test_a_generated_held_out_sets_reports_name_it_as_rlvr_eval_does(
    train_config, monkeypatch, tmp_path
):
    """The run named a generated set's problems by its cache file's stem
    (chain_sum-n3-s...), rlvr eval on the run's checkpoint by its source: the two reports held
    "other problems" and --against refused to pair them."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    source = "reasoning_gym:chain_sum"
    cfg = train_config(
        "steps=1", f"data.train={source}", f"data.eval={source}", "data.gym.train_size=4",
        "data.gym.eval_size=3", "data.max_prompt_tokens=256", "eval.at_end=true",
    )  # fmt: skip
    report = json.loads((train(cfg).run_dir / "eval_reports" / "step_000001.json").read_text())
    assert [p["dataset"] for p in report["problems"]] == [source] * 3
    assert list(report["per_dataset"]) == [source] and report["data"] == [source]


def test_without_an_evaluation_before_training_there_is_no_change_line(train_config):
    result = train(train_config("steps=2", "eval.every=1"))
    assert sorted(result.evals) == [1, 2] and result.change_intervals == {}
    assert not any(x.startswith("held-out change:") for x in result.summary_lines())
    assert (result.run_dir / "eval_reports" / "step_000002.json").is_file()


def test_eval_reports_false_writes_no_reports(train_config):
    """Every held-out evaluation wrote its per-problem report (the demo's: 235 kB each), with
    no way to turn it off; `eval.reports=false` writes none, and the scores stay in metrics."""
    cfg = train_config("steps=2", "eval.every=1", "eval.at_start=true", "eval.reports=false")
    result = train(cfg)
    assert not (result.run_dir / "eval_reports").exists()
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows if "eval/avg@1" in r] == [0, 1, 2] == sorted(result.evals)
    assert result.change_intervals == {}
    line = next(x for x in result.summary_lines() if x.startswith("held-out change:"))
    assert line.endswith(" pts")  # the change, without an interval


def test_a_resumed_run_keeps_its_reports_and_pairs_with_step_0(train_config):
    """A resumed process never evaluated step 0, yet its summary pairs with step 0's report;
    a report of a step after the checkpoint goes (its step runs again), as its row does."""
    first = train(train_config("steps=2", "eval.every=1", "eval.at_start=true"))
    evals = first.run_dir / "eval_reports"
    before = (evals / "step_000000.json").read_bytes()
    (evals / "step_000003.json").write_text("{}")  # of a step after the checkpoint
    result = train(train_config("steps=4", "eval.every=2", "eval.at_start=true"), resume=True)
    assert sorted(p.name for p in evals.iterdir()) == [
        "step_000000.json",
        "step_000001.json",
        "step_000002.json",
        "step_000004.json",
    ]
    assert (evals / "step_000000.json").read_bytes() == before
    assert sorted(result.evals) == [0, 1, 2, 4] and "avg@1" in result.change_intervals
    line = next(x for x in result.summary_lines() if x.startswith("held-out change:"))
    assert "paired over" in line


@pytest.mark.parametrize(
    ("at_start", "at_end", "evaluated"), [(False, False, [2]), (True, True, [0, 2, 3])]
)
def test_eval_every_keeps_at_start_and_at_end(train_config, at_start, at_end, evaluated):
    # step 0 is a multiple of eval.every, but only eval.at_start evaluates before training
    cfg = train_config(
        "steps=3", "eval.every=2", f"eval.at_start={at_start}", f"eval.at_end={at_end}"
    )
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows if "eval/avg@1" in r] == evaluated
    assert sorted(result.evals) == evaluated


@pytest.mark.parametrize(
    "extra", [(), ("model.lora.rank=4", "optim.lr=0.05")], ids=["full-weights", "lora"]
)
def test_resume_after_a_crash_continues_exactly(train_config, monkeypatch, extra, capsys):
    if extra:
        pytest.importorskip("peft")
    full = train(train_config("steps=4", *extra, out="full"))
    cfg = train_config("steps=4", *extra, "checkpoint.every=2", "checkpoint.keep_last=1", out="cut")
    real_write = MetricsWriter.write

    def crash_after_step_3(self, step, metrics):
        row = real_write(self, step, metrics)
        if step == 3:  # the row of step 3 is on disk, its checkpoint is not
            raise KeyboardInterrupt
        return row

    monkeypatch.setattr(MetricsWriter, "write", crash_after_step_3)
    with pytest.raises(KeyboardInterrupt):
        train(cfg)
    monkeypatch.setattr(MetricsWriter, "write", real_write)
    assert [p.name for p in list_checkpoints(cfg.log.output_dir)] == ["step_000002"]
    err = capsys.readouterr().err
    assert f"interrupted: --resume {cfg.log.output_dir} (" in err
    assert "continues from step_000002" in err
    train(cfg, resume=True)
    cut_rows = read_metrics(full.run_dir.parent / "cut" / "metrics.jsonl")
    assert [r["step"] for r in cut_rows] == [1, 2, 3, 4]
    assert _stable(cut_rows) == _stable(read_metrics(full.run_dir / "metrics.jsonl"))


class _CtrlC(Callback):
    """Presses Ctrl-C ``times`` times while step ``at`` is being announced."""

    def __init__(self, at: int, times: int) -> None:
        self.at, self.times = at, times

    def on_step(self, job, step, record):
        if step == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # the handler runs on the main thread between bytecodes


def test_ctrl_c_stops_after_the_step_with_a_checkpoint(train_config, capsys):
    """With no checkpoint planned before the end, a first Ctrl-C still leaves one of the last
    finished step, and the resumed run equals the uninterrupted one; a second stops at once."""
    full = train(train_config("steps=4", out="full"))
    cfg = train_config("steps=4", out="cut")
    with pytest.raises(KeyboardInterrupt):
        train(cfg, callbacks=[_CtrlC(at=2, times=1)])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert [p.name for p in list_checkpoints(cfg.log.output_dir)] == ["step_000002"]
    err = capsys.readouterr().err
    assert "Ctrl-C: stopping after the step in flight with a checkpoint" in err
    assert "continues from step_000002" in err
    train(cfg, resume=True)
    cut_rows = read_metrics(full.run_dir.parent / "cut" / "metrics.jsonl")
    assert _stable(cut_rows) == _stable(read_metrics(full.run_dir / "metrics.jsonl"))
    twice = train_config("steps=4", out="twice")
    with pytest.raises(KeyboardInterrupt):
        train(twice, callbacks=[_CtrlC(at=2, times=2)])
    assert list_checkpoints(twice.log.output_dir) == []
    assert "continues from the start (no checkpoint yet)" in capsys.readouterr().err


def test_sigterm_stops_after_the_step_with_a_checkpoint(train_config, capsys):
    """SIGTERM (a cluster's pre-emption, ``kill``) ended the run at once and lost the steps
    since the last checkpoint; it now stops as a first Ctrl-C does, and the resumed run
    equals the uninterrupted one."""

    class Term(Callback):
        def on_step(self, job, step, record):
            if step == 2:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)  # the handler runs on the main thread between bytecodes

    full = train(train_config("steps=4", out="full"))
    cfg = train_config("steps=4", out="cut")
    with pytest.raises(KeyboardInterrupt) as stopped:
        train(cfg, callbacks=[Term()])
    assert stopped.value.signum == signal.SIGTERM  # the command line exits 143
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert [p.name for p in list_checkpoints(cfg.log.output_dir)] == ["step_000002"]
    assert "SIGTERM: stopping after the step in flight with a checkpoint" in capsys.readouterr().err
    train(cfg, resume=True)
    cut_rows = read_metrics(full.run_dir.parent / "cut" / "metrics.jsonl")
    assert _stable(cut_rows) == _stable(read_metrics(full.run_dir / "metrics.jsonl"))


def test_ctrl_c_during_the_evaluation_before_training_stops_before_any_step(train_config, capsys):
    """No step is in flight while a run evaluates before training: a Ctrl-C there ran a whole
    step more (minutes on a large model) and checkpointed it before stopping."""

    class AtStart(Callback):
        def on_eval(self, job, step, record):
            if step == 0:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # the handler runs on the main thread between bytecodes

    cfg = train_config("steps=3", "eval.at_start=true", out="start")
    with pytest.raises(KeyboardInterrupt):
        train(cfg, callbacks=[AtStart()])
    rows = read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0]
    assert list_checkpoints(cfg.log.output_dir) == []
    err = capsys.readouterr().err
    assert "continues from the start (no checkpoint yet)" in err
    # it says what it does (it said it would stop after the step in flight with a checkpoint)
    assert "Ctrl-C: stopping after the evaluation before training, without a checkpoint" in err
    assert "step in flight" not in err


def test_fresh_run_refuses_a_used_directory(train_config):
    cfg = train_config("steps=1")
    train(cfg)
    with pytest.raises(ValueError, match="already holds a run"):
        train(cfg)


def test_a_second_run_in_a_running_runs_directory_is_refused(train_config):
    """Two runs in one directory wrote over each other's metrics and checkpoints: a fresh run
    started before the first wrote metrics passed the used-directory check, and two
    ``--resume`` both ran. The running run holds the directory; the second is refused."""
    cfg = train_config("steps=2", "checkpoint.every=1")
    refused = []

    class SecondRun(Callback):
        def on_step(self, job, step, record):
            for resume in (False, True):
                with pytest.raises(ValueError, match="another rlvr run is writing there") as err:
                    train(cfg, resume=resume)
                refused.append(str(err.value))

    train(cfg, callbacks=[SecondRun()])
    assert len(refused) == 4 and "\n" not in refused[0]
    rows = read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]  # the first run's rows only
    train(cfg, resume=True)  # once it ended, the directory is free again


def test_a_run_started_while_another_starts_is_refused_before_it_writes(train_config):
    """The check at start sees a run holding the directory (here: a lock held in this process),
    before the model loads; the directory is left as the holder has it."""
    from rlvr.locks import holding
    from rlvr.train.run_dir import LOCK_FILE

    cfg = train_config("steps=1")
    out = Path(cfg.log.output_dir)
    with holding(out / LOCK_FILE, "busy"):
        with pytest.raises(ValueError, match="another rlvr run is writing there"):
            train(cfg)
        assert [p.name for p in out.iterdir()] == [LOCK_FILE]
    train(cfg)


def test_a_resume_with_fewer_steps_than_the_run_took_is_refused(train_config):
    """`--resume DIR steps=1` on a run at step 2 ran no step, re-evaluated and ended as if
    finished at step 1, without a word; nothing of the run is changed now."""
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    metrics = (Path(cfg.log.output_dir) / "metrics.jsonl").read_text()
    fewer = dataclasses.replace(cfg, steps=1)
    with pytest.raises(
        ValueError, match=r"is at step 2 \(step_000002\), past this configuration's last step 1"
    ):
        train(fewer, resume=True)
    assert (Path(cfg.log.output_dir) / "metrics.jsonl").read_text() == metrics
    train(cfg, resume=True)  # the same steps: a finished run, resumed, is still fine


def test_a_resumed_run_refuses_another_model(train_config, tmp_path):
    """Its weights come from the checkpoint; config.yaml would name a model it never used."""
    cfg = train_config("steps=1", "checkpoint.every=1")
    train(cfg)
    other = tmp_path / "other-model"
    shutil.copytree(cfg.model.name, other)  # the same weights under another name
    moved = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name=str(other)))
    with pytest.raises(ValueError, match="started from .* and resumes from its checkpoint"):
        train(moved, resume=True)
    assert read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl")[-1]["step"] == 1


def test_reference_model_loaded_only_with_kl(train_config):
    from rlvr.train.run_dir import prepare_run_dir

    for kl, loaded in ((0.0, False), (0.05, True)):
        cfg = train_config(f"objective.kl_coef={kl}", out=f"kl{kl}")
        run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
        assert (run.reference is not None) is loaded
    result = train(train_config("objective.kl_coef=0.05", "rollout.minibatches=2", out="kl-train"))
    row = read_metrics(result.run_dir / "metrics.jsonl")[-1]
    assert row["update/optimizer_steps"] == 2


def test_failing_verifier_is_counted_not_fatal(train_config):
    """The warning names the first error: it said only "verifier failures or timeouts", so a
    bug in your verifier (every completion scoring reward.wrong) left no trace of its cause."""
    with pytest.warns(UserWarning, match="verifier.*; first: RuntimeError: broken verifier$"):
        result = train(train_config("reward.verifier=raises", "reward.wrong=-1"))
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    for row in rows:
        assert row["verifier/failures"] == 8  # every completion: 2 prompts x 4
        assert row["reward/mean"] == -1.0 and row["groups/identical_frac"] == 1.0
        assert row["loss/policy"] == 0.0 and "log/nonfinite_metrics" not in row


def test_all_groups_filtered_skips_the_update(train_config):
    cfg = train_config("reward.verifier=raises", "rollout.filter_zero_advantage=true")
    with pytest.warns(UserWarning):
        result = train(cfg)
    for row in read_metrics(result.run_dir / "metrics.jsonl"):
        assert row["update/skipped"] == 1 and row["groups/filtered_zero_adv"] == 2
        assert "loss/policy" not in row


def test_mask_truncated_drops_truncated_rows(train_config):
    result = train(train_config("rollout.mask_truncated=true", "rollout.max_new_tokens=4"))
    for row in read_metrics(result.run_dir / "metrics.jsonl"):
        truncated = round(row["response/clipped_frac"] * 8)
        assert row["rollout/masked_truncated"] == truncated
        assert row["update/skipped"] == float(truncated == 8)
        if truncated < 8:
            assert row["batch/sequences"] == 8 - truncated


def test_long_prompts_are_skipped_or_truncated_with_a_count(train_config):
    with (
        pytest.warns(UserWarning, match="skipped 6 prompt"),
        pytest.raises(ValueError, match="no usable prompts"),
    ):
        train(train_config("data.max_prompt_tokens=3", out="a"))
    with pytest.warns(UserWarning, match="truncated 6 prompt"):
        result = train(
            train_config(
                "data.max_prompt_tokens=6", "data.long_prompts=truncate", "steps=1", out="b"
            )
        )
    row = read_metrics(result.run_dir / "metrics.jsonl")[-1]
    assert row["data/prompts_truncated"] == 6 and row["data/prompts_skipped"] == 0


def test_dynamic_sampling_fills_the_batch(train_config):
    result = train(
        train_config("rollout.dynamic_sampling=true", "rollout.max_sampling_rounds=6", "steps=4")
    )
    for row in read_metrics(result.run_dir / "metrics.jsonl"):
        assert 1 <= row["sampling/rounds"] <= 6
        # a second round happens exactly when the first had a group with equal rewards
        assert (row["sampling/rounds"] > 1) == (row["groups/identical_frac"] > 0)
        if row["sampling/underfilled"] == 0:
            assert row["groups/kept"] == 2 and row["batch/sequences"] == 8


def test_dynamic_sampling_keeps_informative_groups_up_to_the_target(train_config, monkeypatch):
    from rlvr.train import rollout
    from rlvr.train.batch import pack
    from rlvr.train.prompts import IndexSampler, Prompt

    rounds = iter(
        [
            [0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1],  # groups: equal, mixed, equal
            [1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0],  # groups: equal, mixed, mixed (one too many)
        ]
    )

    def fake_round(policy, tokenizer, scorer, prompts, cfg):
        rewards = torch.tensor(next(rounds), dtype=torch.float32)
        seqs = pack([[1, 2]] * 12, [[i + 3] for i in range(12)], 0)
        return rollout.Round(
            prompts, seqs, [str(i) for i in range(12)], rewards, torch.zeros(12, dtype=torch.bool)
        )

    monkeypatch.setattr(rollout, "sample_round", fake_round)
    cfg = train_config(
        "rollout.prompts_per_step=3",
        "rollout.dynamic_sampling=true",
        "rollout.max_sampling_rounds=5",
    )
    prompts = [Prompt(ids=(1, 2), reference=str(i), example=None) for i in range(6)]
    sampled, kept = rollout.collect_rounds(None, None, None, prompts, IndexSampler(6, seed=0), cfg)
    assert len(sampled) == 2 and [len(r.prompts) for r in kept] == [1, 2]
    batch, counts = rollout.assemble(kept, 0, cfg)
    assert batch.rewards.tolist() == [1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0]
    assert batch.seqs.input_ids[:, -1].tolist() == [7, 8, 9, 10, 7, 8, 9, 10, 11, 12, 13, 14]
    assert counts["groups/kept"] == 3


def test_micro_batched_update_equals_full_batch(train_config):
    from rlvr.train.rollout import assemble, behaviour_logp, collect_rounds
    from rlvr.train.run_dir import prepare_run_dir
    from rlvr.train.update import update_policy

    params = []
    for micro in ("null", "3"):
        cfg = train_config(
            f"optim.micro_batch_size={micro}",
            "optim.eps=1.0",
            "optim.lr=1e-2",
            "rollout.prompts_per_step=3",
            out=f"m{micro}",
        )
        run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
        torch.manual_seed(5)
        run.scorer.verifier.options  # noqa: B018 - the same scorer for both runs
        _, kept = collect_rounds(
            run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
        )
        batch, _ = assemble(kept, run.tokenizer.pad_token_id, cfg)
        batch, _ = behaviour_logp(batch, run.policy, None, cfg)
        assert batch.advantages.abs().sum() > 0  # a real gradient, not all-zero advantages
        metrics = update_policy(run.policy, run.optimizer, run.scheduler, batch, cfg)
        params.append((metrics, {k: v.clone() for k, v in run.policy.state_dict().items()}))
    (m_full, p_full), (m_micro, p_micro) = params
    assert m_micro["loss/policy"] == pytest.approx(m_full["loss/policy"], rel=1e-5, abs=1e-7)
    assert m_micro["optim/grad_norm"] == pytest.approx(m_full["optim/grad_norm"], rel=1e-4)
    for name, value in p_full.items():
        torch.testing.assert_close(p_micro[name], value, rtol=1e-5, atol=1e-7)


def test_bf16_autocast_and_gradient_checkpointing_train(train_config):
    cfg = train_config(
        "model.autocast=bf16",
        "model.gradient_checkpointing=true",
        "rollout.minibatches=2",
        "optim.micro_batch_size=3",
    )
    rows = read_metrics(train(cfg).run_dir / "metrics.jsonl")
    for row in rows:
        assert "log/nonfinite_metrics" not in row
        assert math.isfinite(row["loss/policy"]) and math.isfinite(row["policy/entropy"])


def test_prompt_limit_fits_the_models_context(train_config, tiny_model):
    from rlvr.train.loop import fit_context

    model, _ = tiny_model
    context = model.config.max_position_embeddings
    assert fit_context(train_config(), model.config).max_prompt_tokens == 64
    cfg = train_config(f"data.max_prompt_tokens={context}", "rollout.max_new_tokens=24")
    with pytest.warns(UserWarning, match="exceeds the model's context"):
        assert fit_context(cfg, model.config).max_prompt_tokens == context - 24
    with pytest.raises(ValueError, match="leaves no room"):
        fit_context(train_config(f"rollout.max_new_tokens={context}"), model.config)


def test_prompt_limit_leaves_room_for_a_larger_eval_budget(train_config, tiny_model):
    """eval.max_new_tokens above the rollout's let held-out prompt + completion pass the context."""
    from rlvr.train.loop import fit_context

    model, _ = tiny_model
    context = model.config.max_position_embeddings
    cfg = train_config(
        f"data.max_prompt_tokens={context - 24}",
        "rollout.max_new_tokens=24",
        "eval.max_new_tokens=40",
    )
    with pytest.warns(UserWarning, match="eval.max_new_tokens=40 exceeds the model's context"):
        assert fit_context(cfg, model.config).max_prompt_tokens == context - 40
    no_eval = train_config(
        f"data.max_prompt_tokens={context - 24}",
        "rollout.max_new_tokens=24",
        "eval.max_new_tokens=40",
        "data.eval=null",
    )
    assert (
        fit_context(no_eval, model.config).max_prompt_tokens == context - 24
    )  # nothing is evaluated


def test_reward_range_must_hold_the_rewards(train_config):
    with pytest.raises(
        ValueError, match=r"objective.reward_range=\[0.0, 1.0\] must hold reward.wrong=-1.0"
    ):
        train_config("objective.name=apmpo", "reward.wrong=-1")
    train_config("objective.name=apmpo", "objective.reward_range=[-1, 1]", "reward.wrong=-1")
    train_config("objective.name=etr", "reward.wrong=-1")
    penalised = ("reward.verifier=math+format", "reward.options={format_penalty: -0.5}")
    with pytest.raises(ValueError, match=r"must hold reward.options.format_penalty=-0.5"):
        train_config("objective.name=apmpo", *penalised)  # refused at its first malformed answer
    train_config("objective.name=apmpo", "objective.reward_range=[-0.5, 1]", *penalised)


def test_a_contrasts_reward_range_must_hold_the_rewards(train_config):
    """An objective of ``log.contrast`` reads the rewards through its ``reward_range`` too: one
    that cannot hold them is a configuration error, not a stop at the first update."""
    with pytest.raises(
        ValueError,
        match=r"^log.contrast 'apmpo': reward_range=\[0.0, 1.0\] must hold reward.wrong=-1.0 "
        r"and reward.correct=1.0 \(e.g. 'apmpo:reward_range=\[-1.0, 1.0\]'\)$",
    ):
        train_config("objective.name=etr", "reward.wrong=-1", "log.contrast=[grpo, apmpo]")
    train_config("reward.wrong=-1", "log.contrast=['apmpo:reward_range=[-1, 1]']")


@pytest.mark.parametrize("score", [5.0, -3.0])
def test_a_score_outside_wrong_to_correct_stops_the_run_on_its_first_step(
    train_config, score, tmp_path
):
    """A verifier of one's own that returned 5 or -3 trained on that scale without a word, and
    reward/accuracy counted every score >= reward.correct as correct."""
    from rlvr.rewards import register

    register(f"scores_{score:g}")(lambda completion, reference: score)
    cfg = train_config(f"reward.verifier=scores_{score:g}", "eval.at_start=true")
    with pytest.raises(
        ValueError, match=rf"'scores_{score:g}' scored a completion {score:g}, outside \[0, 1\]"
    ):
        train(cfg)
    assert read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl") == []  # not even the eval


def test_scores_between_wrong_and_correct_and_a_lower_format_penalty_train(train_config):
    from rlvr.rewards import register
    from rlvr.train.config import RewardConfig
    from rlvr.train.rollout import check_scores

    register("half_or_wrong")(
        lambda completion, reference, *, correct=1.0, wrong=0.0: (correct + wrong) / 2
    )
    result = train(train_config("reward.verifier=half_or_wrong", "reward.wrong=-1", "steps=1"))
    assert result.metrics["reward/mean"] == 0.0 and result.metrics["reward/accuracy"] == 0.0
    penalised = RewardConfig(verifier="math+format", options={"format_penalty": -2})
    assert penalised.score_range == (-2.0, 1.0)
    check_scores([-2.0, 0.0, 1.0], penalised)
    with pytest.raises(ValueError, match=r"scored a completion -2.5, outside \[-2, 1\]"):
        check_scores([1.0, -2.5], penalised)


@pytest.mark.parametrize(
    "split",
    [[], ["optim.micro_batch_size=5", "rollout.minibatches=2"]],
    ids=["one-pass", "micro+mini"],
)
def test_rl_raises_a_learnable_reward(train_config, tiny_model, split):
    """Reward: the completion starts like the random model's most common first character.

    Any misalignment of rewards, advantages and sequences (filtering, length-sorted
    micro-batches, mini-batches) would stop the reward from climbing.
    """
    import collections

    from rlvr.generation import SamplingConfig, generate
    from rlvr.rewards import register

    model, tokenizer = tiny_model
    torch.manual_seed(0)
    texts = generate(
        model, tokenizer, ["What is 12 + 7?"], n=64, sampling=SamplingConfig(max_new_tokens=4)
    ).texts
    first = collections.Counter(t[:1] for t in texts).most_common(1)[0][0]

    @register("starts_like_most")
    def starts_like_most(completion, reference, *, correct=1.0, wrong=0.0):
        return correct if completion.startswith(first) else wrong

    overrides = [
        "reward.verifier=starts_like_most",
        "steps=25",
        "optim.lr=2e-2",
        "rollout.prompts_per_step=4",
        "rollout.group_size=8",
        "rollout.max_new_tokens=4",
        *split,
    ]
    rows = read_metrics(train(train_config(*overrides)).run_dir / "metrics.jsonl")
    rewards = [r["reward/mean"] for r in rows]
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.3, rewards


def test_resume_without_a_checkpoint_starts_over(train_config, monkeypatch):
    """A run stopped before its first checkpoint starts over (one that finished without any
    is refused: test_a_finished_run_without_a_checkpoint_is_not_started_over)."""
    cfg = train_config("steps=2", "checkpoint.save_final=false")
    train(cfg)
    metrics = Path(cfg.log.output_dir) / "metrics.jsonl"
    rows = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(r for r in rows if json.loads(r)["step"] < 2))  # killed in step 2
    with pytest.warns(UserWarning, match="no checkpoint"):
        result = train(cfg, resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2]


def test_a_start_that_fails_to_build_writes_nothing(train_config, tmp_path):
    """A resume whose build fails (bad data) keeps the run's config.yaml and metrics, so the
    run can still be resumed as it was; a fresh start that fails leaves no run directory."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "answer": "1"}\n{"prompt": "b"}\n')
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    saved = {name: (run_dir / name).read_bytes() for name in ("config.yaml", "metrics.jsonl")}
    broken = dataclasses.replace(cfg, steps=4, data=dataclasses.replace(cfg.data, train=str(bad)))
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        train(broken, resume=True)
    assert {name: (run_dir / name).read_bytes() for name in saved} == saved

    fresh = dataclasses.replace(
        broken, log=dataclasses.replace(cfg.log, output_dir=str(tmp_path / "never"))
    )
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        train(fresh)
    assert not (tmp_path / "never").exists()


def _tensorboard_steps(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    return [e.step for e in events.Scalars(tag)]


def test_resume_without_a_checkpoint_drops_the_killed_runs_tensorboard_events(train_config):
    cfg = train_config(
        "steps=2", "checkpoint.save_final=false", "log.tensorboard=true", "eval.at_start=true"
    )
    train(cfg)
    metrics = Path(cfg.log.output_dir) / "metrics.jsonl"
    rows = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(r for r in rows if json.loads(r)["step"] < 2))  # killed in step 2
    with pytest.warns(UserWarning, match="no checkpoint"):
        result = train(cfg, resume=True)
    assert _tensorboard_steps(result.run_dir, "reward/mean") == [1, 2]
    assert _tensorboard_steps(result.run_dir, "eval/avg@1") == [0]


def test_an_output_dir_that_cannot_be_made_is_refused_before_loading(
    train_config, tmp_path, monkeypatch
):
    import rlvr.train.loop

    def build_run(*args):
        raise AssertionError("loaded although the run directory cannot be made")

    monkeypatch.setattr(rlvr.train.loop, "build_run", build_run)
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file", tmp_path / "file" / "run"):
        cfg = train_config(f"log.output_dir={out}")
        with pytest.raises(ValueError, match=r"log.output_dir=.*file"):
            train(cfg)


def test_held_out_prompts_are_sampled_as_the_prompt_set_prepared_them(train_config):
    """With data.long_prompts=truncate the held-out prompts were re-tokenised in full for the
    evaluation, ignoring the truncation (and a context limit that lowered max_prompt_tokens)."""
    from rlvr.train.loop import evaluate
    from rlvr.train.run_dir import prepare_run_dir

    cfg = train_config("data.max_prompt_tokens=4", "data.long_prompts=truncate")
    with pytest.warns(UserWarning, match="truncated"):
        run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
    sampled, generate = [], run.generator.generate

    def spy(prompts, **kwargs):
        sampled.extend(list(ids) for ids in prompts)
        return generate(prompts, **kwargs)

    run.generator.generate = spy
    try:
        record = evaluate(run)
    finally:
        run.close()
    prepared = [list(p.ids) for p in run.eval_set.prompts]
    assert run.eval_set.truncated > 0 and all(len(ids) == 4 for ids in prepared)
    assert sampled == prepared  # each prompt once, with n samples
    assert record.metrics["eval/num_problems"] == len(prepared)


def test_held_out_prompts_that_are_training_prompts_are_warned(train_config, tmp_path):
    """data.eval sharing prompts with data.train gave eval/* scores labelled held-out without a word."""
    import warnings

    from rlvr.train.run_dir import prepare_run_dir

    rows = [{"prompt": f"What is {a} + 1?", "answer": str(a + 1)} for a in range(5)]
    train_file, eval_file = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    train_file.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    for shared, held_out in ((1, rows[2:]), (0, rows[3:])):
        eval_file.write_text("".join(json.dumps(r) + "\n" for r in held_out))
        cfg = train_config(f"data.train={train_file}", f"data.eval={eval_file}", out=f"o{shared}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None).close()
        said = [str(w.message) for w in caught if "also training prompts" in str(w.message)]
        expected = [
            f"data.eval: {shared} of {len(held_out)} held-out prompts are also training prompts"
        ]
        assert [m.split(" (")[0] for m in said] == (expected if shared else [])


def test_a_held_out_set_naming_one_problem_twice_is_warned(train_config, tmp_path):
    """A held-out file with a row given twice (one id twice) counted that problem twice in
    every eval/avg@k and eval/pass@k without a word."""
    import warnings
    from importlib import resources

    from rlvr.train.run_dir import prepare_run_dir

    rows = (resources.files("rlvr") / "assets" / "chain_sum-mini.jsonl").read_text().splitlines()
    eval_file = tmp_path / "heldout.jsonl"
    eval_file.write_text("\n".join([rows[0], rows[1], rows[0]]) + "\n")
    cfg = train_config(
        f"data.eval={eval_file}", "data.eval_fields=reasoning_gym", "data.max_prompt_tokens=256"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None).close()
    said = [str(w.message) for w in caught if "repeat the dataset and id" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("1 of 3 problems repeat"), said


def test_samples_come_from_every_round_of_the_step():
    """Under dynamic sampling samples.jsonl held only the first round's completions, however
    many log.samples_per_step asked for, while the rollout metrics count every round."""
    from rlvr.train import rollout
    from rlvr.train.batch import pack
    from rlvr.train.prompts import Prompt

    def round_of(texts, reward):
        prompts = [Prompt(ids=(1,), reference=texts[0], example=SimpleNamespace(prompt="p"))]
        seqs = pack([[1]] * len(texts), [[2]] * len(texts), 0)
        rewards = torch.full((len(texts),), reward)
        return rollout.Round(prompts, seqs, texts, rewards, torch.zeros(len(texts), dtype=bool))

    sampled = [round_of(["a", "b"], 0.0), round_of(["c", "d"], 1.0)]
    rows = rollout.samples(sampled, 3)
    assert [r["completion"] for r in rows] == ["a", "b", "c"]
    assert [r["reward"] for r in rows] == [0.0, 0.0, 1.0] and rows[2]["reference"] == "c"
    assert len(rollout.samples(sampled, 100)) == 4 and rollout.samples(sampled, 0) == []


@pytest.mark.parametrize("rewards", [[1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], [0.0] * 8])
def test_only_a_step_without_signal_warns(train_config, rewards):
    """Groups that score alike are normal (the demo has 39%) and go unwarned; a step made only
    of them has advantages all 0, which is worth a warning (it printed for any such group)."""
    import types
    import warnings

    from rlvr.train.rollout import Round, rollout_metrics

    cfg = train_config()  # group_size 4: two groups
    rnd = Round(
        prompts=[],
        seqs=types.SimpleNamespace(response_mask=torch.ones(8, 3)),
        texts=["x"] * 8,
        rewards=torch.tensor(rewards),
        truncated=torch.zeros(8, dtype=torch.bool),
        seconds={"generate": 0.0, "score": 0.0},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = rollout_metrics([rnd], cfg)
    signal_less = [w for w in caught if "no learning signal" in str(w.message)]
    assert metrics["groups/identical_frac"] == (0.5 if rewards[0] else 1.0)
    assert len(signal_less) == (0 if rewards[0] else 1)


def test_a_warm_up_as_long_as_the_run_is_warned(train_config):
    """`rlvr sft` warned of it; `rlvr train` with optim.warmup_steps past its optimiser steps
    (steps x rollout.minibatches x rollout.epochs) never reached optim.lr, unsaid."""
    cfg = train_config("rollout.minibatches=2", "optim.warmup_steps=4", "optim.schedule=cosine")
    said = r"optim\.warmup_steps=4 is not below the run's 4 optimiser steps"
    with pytest.warns(UserWarning, match=said):
        train(cfg)
    with warnings.catch_warnings(record=True) as caught:  # one more step: not said
        warnings.simplefilter("always")
        train(train_config("steps=3", "rollout.minibatches=2", "optim.warmup_steps=4", out="b"))
    assert not [w for w in caught if "warmup_steps" in str(w.message)]
