"""A run named by Hub names, as on a GPU node whose Hugging Face cache holds them and
``HF_HUB_OFFLINE`` is set: it trains, records the names (not the cache's paths), resumes
after the cache moved, and its checkpoint evaluates."""

from __future__ import annotations

import json
import shutil

import yaml
from tests.conftest import PROMPTS
from tests.hub_cache import HubCache, use

from rlvr.cli import main as rlvr
from rlvr.train.overrides import dump_yaml


def _cache_the_run_s_names(hub_cache: HubCache, tiny_model_dir) -> None:
    """``org/tiny`` (the tiny test model) and ``org/ds`` (a train and a test split)."""
    rows = "".join(json.dumps(row) + "\n" for row in PROMPTS).encode()
    hub_cache.model("org/tiny", tiny_model_dir)
    hub_cache.dataset("org/ds", {"data/train.jsonl": rows, "data/test.jsonl": rows})


def test_a_run_on_hub_names_resumes_after_the_cache_moved(
    hub_cache, tiny_model_dir, train_config, tmp_path, monkeypatch, capsys
):
    _cache_the_run_s_names(hub_cache, tiny_model_dir)
    hub = ["model.name=org/tiny", "data.train=org/ds", "data.eval=org/ds", "data.eval_split=test"]
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml(train_config(*hub, "steps=1")))
    out = tmp_path / "run"
    assert rlvr(["train", "--config", str(config), f"log.output_dir={out}"]) == 0
    saved = (out / "config.yaml").read_text()
    assert str(hub_cache.home) not in saved
    saved = yaml.safe_load(saved)
    assert saved["model"]["name"] == "org/tiny" and saved["data"]["train"] == "org/ds"

    moved = HubCache(tmp_path / "elsewhere")
    shutil.move(hub_cache.home, moved.home)
    use(moved, monkeypatch)
    assert rlvr(["train", "--resume", str(out), "steps=2"]) == 0
    checkpoint = out / "checkpoints" / "step_000002"
    assert checkpoint.is_dir()
    report = tmp_path / "eval.json"
    argv = ["eval", "--model", str(checkpoint), "-n", "1", "--max-tokens", "4"]
    assert rlvr([*argv, "--output", str(report)]) == 0
    done = json.loads(report.read_text())
    assert done["data"] == ["org/ds"] and done["metrics"]["num_problems"] == len(PROMPTS)


def test_a_hub_set_of_several_splits_as_held_out_set_needs_its_split(
    hub_cache, tiny_model_dir, train_config, tmp_path, capsys
):
    """`rlvr eval --data org/ds` and `data.eval=org/ds` without a split read the hub set's
    train split as the held-out set (`openai/gsm8k`: its 7,473 training problems), where a
    local folder of several splits was refused; a hub set is now refused the same way, from
    the cache's tables and from a snapshot alone (`huggingface-cli download`)."""
    _cache_the_run_s_names(hub_cache, tiny_model_dir)
    rows = "".join(json.dumps(row) + "\n" for row in PROMPTS).encode()
    hub_cache.dataset("org/fetched", {"train.jsonl": rows, "test.jsonl": rows}, configs=None)
    hub_cache.dataset("org/one", {"data.jsonl": rows})
    argv = ["eval", "--model", "org/tiny", "-n", "1", "--max-tokens", "4"]
    for name in ("org/ds", "org/fetched"):
        for dry in ([], ["--dry-run"]):  # the dry run knows a hub set's splits too
            assert rlvr([*argv, "--data", name, *dry]) == 2
            err = capsys.readouterr().err
            assert f"{name}: holds the splits train, test; name one with --split" in err
    report = tmp_path / "one.json"
    assert rlvr([*argv, "--data", "org/one", "--output", str(report)]) == 0  # one split: fine
    config = tmp_path / "run.yaml"
    hub = ["model.name=org/tiny", "data.train=org/ds", "data.eval=org/ds", "steps=1"]
    config.write_text(dump_yaml(train_config(*hub)))
    for dry in ([], ["--dry-run"]):
        assert (
            rlvr(["train", "--config", str(config), f"log.output_dir={tmp_path / 'run'}", *dry])
            == 2
        )
        assert "data.eval: org/ds holds the splits train, test" in capsys.readouterr().err
