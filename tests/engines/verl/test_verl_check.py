"""``python -m rlvr.engines.verl.check``: a verl command line's rlvr settings checked on a CPU,
with the errors a GPU worker would raise at its first loss call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from rlvr.engines.verl.check import main  # noqa: E402

from .test_verl_config import ROOT, command_overrides  # noqa: E402

LOSS = "actor_rollout_ref.actor.policy_loss"
BASE = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"]


def run(capsys, *overrides):
    """``(exit code, stdout, stderr)`` of the check on ``overrides``."""
    code = main([*BASE, *overrides])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_documented_command_line_passes_and_reports_its_hyperparameters(capsys):
    docs = (ROOT / "docs/engines.md").read_text()
    code, out, err = run(capsys, *command_overrides(docs))
    assert code == 0, err
    assert "hyperparameters: eps1=0.2 eps2=0.2 eps3=0.3 eps4=0.2" in out
    assert "note:" not in out
    shown = docs.split("For the complete command line above:\n\n```text\n")[1].split("```")[0]
    assert out == shown


def test_verls_defaults_get_a_note_each(capsys):
    """token-mean and gae are verl's defaults, not ABC-GRPO's: the run would start silently."""
    code, out, _ = run(capsys, f"{LOSS}.loss_mode=rlvr_abc_grpo")
    assert code == 0
    assert "note: abc_grpo's own aggregation is seq-mean-token-mean" in out
    assert "verl's gae, which trains a critic; abc_grpo's own are" in out


def test_verls_grpo_without_the_std_is_abc_grpos_own_estimator(capsys):
    """docs/engines.md: rlvr_group_mean equals verl's grpo with norm_adv_by_std_in_grpo=False."""
    agg = "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean"
    overrides = [f"{LOSS}.loss_mode=rlvr_abc_grpo", agg, "algorithm.adv_estimator=grpo"]
    _, out, _ = run(capsys, *overrides)
    assert "note: the advantages are verl's grpo; abc_grpo's own are" in out
    _, out, _ = run(capsys, *overrides, "algorithm.norm_adv_by_std_in_grpo=False")
    assert "advantages: grpo (norm_adv_by_std_in_grpo=False: rlvr_group_mean)" in out
    assert "note:" not in out


def test_verls_widths_that_replace_the_objectives_own_get_a_note(capsys):
    """Under verl its clip ratios replace the objective's defaults: GRPO gets verl's dual
    clip (3), GSPO verl's 0.2 for its 3e-4; Dr.GRPO's L_max needs loss_scale_factor."""
    _, out, _ = run(capsys, f"{LOSS}.loss_mode=rlvr_grpo")
    assert "note: clip_c=3.0 from actor.clip_ratio_c; grpo's own default is none" in out
    _, out, _ = run(
        capsys, f"{LOSS}.loss_mode=rlvr_grpo", "actor_rollout_ref.actor.clip_ratio_c=inf"
    )
    assert "clip_c" not in out.split("hyperparameters")[1].split("\n", 1)[1]
    _, out, _ = run(capsys, f"{LOSS}.loss_mode=rlvr_gspo")
    assert "note: eps_low=0.2 from actor.clip_ratio_low; gspo's own default is 0.0003" in out
    agg = "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm"
    _, out, _ = run(capsys, f"{LOSS}.loss_mode=rlvr_dr_grpo", agg)
    assert "note: seq-mean-token-sum-norm without actor_rollout_ref.actor.loss_scale_factor" in out
    _, out, _ = run(
        capsys,
        f"{LOSS}.loss_mode=rlvr_dr_grpo",
        agg,
        "actor_rollout_ref.actor.loss_scale_factor=512",
    )
    assert "loss_scale_factor" not in out


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([f"{LOSS}.loss_mode=rlvr_abcgrpo"], "unknown objective 'abcgrpo'"),
        (
            [f"{LOSS}.loss_mode=rlvr_abc_grpo", "actor_rollout_ref.actor.clip_ratio_high=0.28"],
            "rlvr_abc_grpo has no clip_ratio_low/clip_ratio_high",
        ),
        (
            [f"{LOSS}.loss_mode=rlvr_abc_grpo", "actor_rollout_ref.actor.clip_ratio_c=10"],
            "rlvr_abc_grpo has no dual clip",
        ),
        ([f"{LOSS}.loss_mode=rlvr_etr"], "add trainer.v1.trainer_mode=rlvr"),
        (
            [f"{LOSS}.loss_mode=rlvr_pmpo", "trainer.v1.trainer_mode=rlvr", "trainer.use_v1=False"],
            "use_v1=False",
        ),
        (  # the legacy trainer replaces loss_mode by its own "bypass_mode" loss
            [
                f"{LOSS}.loss_mode=rlvr_abc_grpo",
                "algorithm.rollout_correction.bypass_mode=True",
                "trainer.use_v1=False",
            ],
            "swaps in its own bypass_mode loss",
        ),
        (["algorithm.adv_estimator=rlvr_group_means"], "Unknown advantage estimator"),
        ([f"+{LOSS}.rlvr.eps3=0.3"], "needs actor_rollout_ref.actor.policy_loss._target_="),
        ([f"{LOSS}.rlvr.eps3=0.3"], "To append to your config use +"),
    ],
)
def test_what_a_worker_would_raise_is_one_error_line(capsys, overrides, message):
    code, out, err = run(capsys, *overrides)
    assert code == 1 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_the_exact_route_passes_for_etr(capsys):
    code, out, err = run(
        capsys,
        f"{LOSS}.loss_mode=rlvr_etr",
        "trainer.v1.trainer_mode=rlvr",
        "algorithm.adv_estimator=rlvr_group_std",
    )
    assert code == 0, err
    assert out.startswith("rlvr_etr: ETR")


def test_the_example_script_checks_its_overrides_on_a_cpu_with_check_1():
    """``CHECK=1 bash examples/verl_abc_grpo.sh EXTRA...`` runs the check on the script's
    overrides and the appended ones, where the script alone would stop for want of a GPU."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    run = subprocess.run(
        ["bash", str(ROOT / "examples/verl_abc_grpo.sh"), f"+{LOSS}.rlvr.eps3=0.3"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PATH": path, "CHECK": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("rlvr_abc_grpo: ")
    assert "eps3=0.3" in run.stdout and "note:" not in run.stdout


def test_bypass_mode_on_the_v1_trainer_keeps_the_objective(capsys):
    """verl's v1 trainer only takes the rollout's log-probs as the old ones: the loss stays."""
    code, out, _ = run(
        capsys, f"{LOSS}.loss_mode=rlvr_abc_grpo", "algorithm.rollout_correction.bypass_mode=True"
    )
    assert code == 0 and out.startswith("rlvr_abc_grpo: ")
