"""``python -m rlvr.engines.verl.check``: a verl command line's rlvr settings checked on a CPU,
with the errors a GPU worker would raise at its first loss call."""

from __future__ import annotations

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
