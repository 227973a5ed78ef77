"""Every metric a run writes is in the documented list of docs/metrics.md."""

import re
from pathlib import Path

from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.supervised import sft

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def documented() -> list[re.Pattern]:
    """Backticked names in the doc's tables; ``{k}``, ``<name>`` and ``q1 .. q4`` ranges
    become patterns."""
    names = []
    for line in DOC.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", cell):
            names.append(_pattern(name))
        if " .. " in cell:  # `clip/q1_frac` .. `clip/q4_frac`
            first = re.findall(r"`([^`]+)`", cell)[0]
            names.append(_pattern(first.replace("q1", "q{q}")))
    return names


def _pattern(name: str) -> re.Pattern:
    """``{k}``: a number; ``{q}``: a quadrant 1-4; ``<name>``: a ``log.contrast`` entry."""
    pattern = re.escape(name).replace(r"\{k\}", r"\d+").replace(r"\{q\}", "[1-4]")
    return re.compile(pattern.replace("<name>", "[^/]+"))


def test_the_documented_patterns_cover_ranges_and_placeholders():
    patterns = documented()
    for key in ("clip/q3_share", "eval/pass@16", "contrast/apmpo:fss_form=mean/q2_frac"):
        assert any(p.fullmatch(key) for p in patterns), key
    assert not any(p.fullmatch("contrast/grpo/q5_frac") for p in patterns)


def test_no_metric_rlvr_logs_itself_is_taken_for_an_objectives(tmp_path):
    """Every name docs/metrics.md lists is under a prefix of rlvr's own, except the
    objectives' (etr, apmpo, pmpo, gppo): a new prefix of rlvr's would be drawn as one."""
    from rlvr.train.plots import objective_metrics

    names = [p.pattern.replace("\\", "") for p in documented() if "/" in p.pattern]
    own = objective_metrics([{name: 0.0 for name in names}])
    assert sorted(own) == ["apmpo", "etr", "gppo", "pmpo"]


def _undocumented(keys, patterns):
    return sorted(k for k in keys if k != "step" and not any(p.fullmatch(k) for p in patterns))


def test_every_rl_metric_is_documented(train_config):
    patterns, keys = documented(), set()
    for name in ("etr", "apmpo", "gppo"):
        dual = ["objective.clip_c=3.0"] if name == "gppo" else []  # clip/dual_frac
        cfg = train_config(
            f"objective.name={name}",
            "objective.kl_coef=0.01",
            "objective.sft_coef=0.1",
            "rollout.minibatches=2",
            "rollout.filter_zero_advantage=true",
            "rollout.dynamic_sampling=true",
            "eval.at_end=true",
            "log.contrast=[grpo]",
            *dual,
            out=name,
        )
        for row in read_metrics(train(cfg).run_dir / "metrics.jsonl"):
            keys |= set(row)
    assert {
        "apmpo/p",
        "etr/eps_mean",
        "gppo/preserved_frac",
        "kl/ref_k3",
        "sft/loss",
        "eval/avg@1",
        "clip/dual_frac",
        "contrast/grpo/q4_frac",
    } <= keys
    assert _undocumented(keys, patterns) == []


def test_every_async_metric_is_documented(train_config):
    cfg = train_config("rollout.staleness=1", "rollout.decoupled=true", out="async")
    keys = set().union(*read_metrics(train(cfg).run_dir / "metrics.jsonl"))
    assert {"rollout/staleness_mean", "time/wait_update", "decoupled/capped_frac"} <= keys
    assert _undocumented(keys, documented()) == []


def test_every_sft_metric_is_documented(tiny_model_dir, sft_file, tmp_path):
    from rlvr.train.config import LogConfig, ModelConfig, SFTConfig, SFTDataConfig

    cfg = SFTConfig(
        model=ModelConfig(name=str(tiny_model_dir)),
        data=SFTDataConfig(train=sft_file, eval=sft_file),
        batch_size=3,
        log=LogConfig(
            output_dir=str(tmp_path / "s"), tensorboard=False, progress="off", plots=False
        ),
    )
    keys = {k for row in read_metrics(sft(cfg).run_dir / "metrics.jsonl") for k in row}
    assert "sft/eval_loss" in keys
    assert _undocumented(keys, documented()) == []
