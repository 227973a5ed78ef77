"""Every user error is one line `rlvr: error: ...`, exit status 2, found before anything loads."""

import pytest

from rlvr.cli import main as rlvr


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("rlvr: error: "), err
    return err[0]


def test_missing_training_file_fails_before_the_preset_is_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    missing = tmp_path / "missing.jsonl"
    assert rlvr(["train", f"data.train={missing}"]) == 2
    assert (
        _one_error_line(capsys) == f"rlvr: error: data.train: {missing}: no such file or directory"
    )
    assert not (tmp_path / "cache").exists()  # nothing was built or generated


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=./no/such/model"], "model.name: ./no/such/model: no such directory"),
        (["reward.verifier=nope"], "reward.verifier: unknown verifier 'nope'"),
        (["rollout.group_size=x"], "rollout.group_size must be int, got 'x'"),
        (["objective.eps9=1"], "objective: unknown hyperparameter(s) eps9"),
    ],
)
def test_bad_values_are_one_line(overrides, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    assert rlvr(["train", *overrides]) == 2
    assert message in _one_error_line(capsys)


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(ValueError, match="no such file or directory"):
        rlvr(["train", f"data.train={tmp_path / 'missing.jsonl'}", "--debug"])


def test_unknown_command(capsys):
    assert rlvr(["trian"]) == 2
    assert "unknown command 'trian'; valid: train, sft" in _one_error_line(capsys)
