import dataclasses
import json

import pytest

import rlvr.presets.tiny as tiny_preset
from rlvr.models import PRESETS, load_model, load_tokenizer
from rlvr.models.tiny import TinySize
from rlvr.presets.tiny import (
    TINY,
    SftSettings,
    TinyPresetSettings,
    cached_tiny,
    tiny_cache_key,
    tiny_held_out,
    tiny_sft_pairs,
)

# Small enough to build in a second or two; the real preset differs only in sizes.
MICRO = TinyPresetSettings(
    task_config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1},
    num_pairs=300,
    bare_fraction=0.5,
    held_out_size=40,
    vocab_size=300,
    size=TinySize(
        hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_position_embeddings=128
    ),
    sft=SftSettings(steps=4, batch_size=8, checkpoint_every=2),
)


def test_tiny_is_registered():
    from rlvr.models import BUILTIN_PRESETS, preset_names

    assert PRESETS["tiny"] is tiny_preset.build_tiny  # registered when its module was imported
    assert BUILTIN_PRESETS["tiny"] == tiny_preset.__name__
    assert {"tiny", "smollm2-135m"} <= set(preset_names())


def test_cache_key_follows_settings_and_version(monkeypatch):
    assert tiny_cache_key(MICRO) == tiny_cache_key(dataclasses.replace(MICRO))
    assert tiny_cache_key(MICRO) != tiny_cache_key(dataclasses.replace(MICRO, bare_fraction=0.4))
    assert tiny_cache_key(MICRO) != tiny_cache_key(
        dataclasses.replace(MICRO, sft=SftSettings(steps=4, batch_size=8))
    )
    assert tiny_cache_key(MICRO) != tiny_cache_key(TINY)
    before = tiny_cache_key(MICRO)
    monkeypatch.setattr(tiny_preset, "TINY_BUILD_VERSION", tiny_preset.TINY_BUILD_VERSION + 1)
    assert tiny_cache_key(MICRO) != before


def test_sft_pairs_never_show_a_held_out_question():
    held_out = {entry["question"] for entry in tiny_held_out(MICRO)}
    pairs = tiny_sft_pairs(MICRO)
    assert len(held_out) > 0
    assert not held_out & {pair.prompt for pair in pairs}
    # 2- and 3-term one-digit sums repeat often: the filter must have removed some
    assert len(pairs) < MICRO.num_pairs
    bare = sum(pair.response.startswith("<think>\n</think>") for pair in pairs) / len(pairs)
    assert 0.4 < bare < 0.6


def test_build_saves_a_loadable_model_and_is_reused(tmp_path, monkeypatch):
    path = cached_tiny(tmp_path, MICRO)
    assert path.name == f"tiny-{tiny_cache_key(MICRO)}"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".{path.name}.lock", path.name]  # the work directory is gone
    summary = json.loads((path / "tiny_preset.json").read_text())
    assert summary["settings"]["sft"]["steps"] == 4
    assert sum(1 for _ in (path / "sft.jsonl").open()) == summary["sft_pairs"]
    steps = [json.loads(line)["step"] for line in (path / "sft-run" / "metrics.jsonl").open()]
    assert steps == [1, 2, 3, 4]
    model, tokenizer = load_model(str(path))
    assert model.config.model_type == "qwen2" and model.config.hidden_size == 16
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.chat_template and not (path / "trainer_state.pt").exists()

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the cached model was rebuilt")

    monkeypatch.setattr(tiny_preset, "build_tiny_into", no_rebuild)
    assert cached_tiny(tmp_path, MICRO) == path


class Killed(Exception):
    """Stands for the process being killed in the middle of the warm start."""


def test_killed_build_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    import torch

    from rlvr.train import supervised

    real_step, calls = supervised.sft_step, {"n": 0, "kill_at": 3}

    def dies_at_step_3(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == calls["kill_at"]:
            raise Killed
        return real_step(*args, **kwargs)

    monkeypatch.setattr(supervised, "sft_step", dies_at_step_3)
    with pytest.raises(Killed):
        cached_tiny(tmp_path / "a", MICRO)
    assert not (tmp_path / "a" / f"tiny-{tiny_cache_key(MICRO)}").exists()
    calls.update(n=0, kill_at=None)
    resumed = cached_tiny(tmp_path / "a", MICRO)
    assert calls["n"] == 2  # steps 3 and 4 only
    monkeypatch.setattr(supervised, "sft_step", real_step)
    whole = cached_tiny(tmp_path / "b", MICRO)
    a, _ = load_model(str(resumed))
    b, _ = load_model(str(whole))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0, msg=name)


def test_warm_start_uses_the_build_thread_count_whatever_the_caller_uses(tmp_path, monkeypatch):
    """The weights depend on torch's thread count, so every command must build the same preset."""
    import torch

    from rlvr.train import supervised

    real_step, seen = supervised.sft_step, []

    def recording_step(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real_step(*args, **kwargs)

    monkeypatch.setattr(supervised, "sft_step", recording_step)
    caller = torch.get_num_threads()
    torch.set_num_threads(tiny_preset.BUILD_THREADS + 1)
    try:
        cached_tiny(tmp_path, MICRO)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(caller)
    assert seen == [tiny_preset.BUILD_THREADS] * MICRO.sft.steps
    assert after == tiny_preset.BUILD_THREADS + 1  # the caller's count is given back


def test_saved_tokenizer_tokenizes_like_the_trained_one(tmp_path):
    from rlvr.models.tiny import build_task_tokenizer, random_model

    pairs = [(pair.prompt, pair.response) for pair in tiny_sft_pairs(MICRO)]
    trained = build_task_tokenizer(pairs, vocab_size=512)
    random_model(trained, MICRO.size).save_pretrained(tmp_path)
    trained.save_pretrained(tmp_path)
    loaded = load_tokenizer(str(tmp_path))
    text = trained.apply_chat_template(
        [{"role": "user", "content": pairs[0][0]}], tokenize=False, add_generation_prompt=True
    )
    text += pairs[0][1]
    assert loaded(text)["input_ids"] == trained(text)["input_ids"]
    # merges cross spaces: the fixed prompt phrase is one token
    assert len(trained(pairs[0][0])["input_ids"]) < len(pairs[0][0].split())


def test_processes_started_together_build_once(tmp_path, monkeypatch, capsys):
    """A study's first two runs on a fresh machine each built into the same work directory,
    and one failed (its files removed under it); now one builds and the other waits."""
    import threading
    import time

    builds, inside = [], threading.Lock()

    def slow_build(work, settings):
        assert inside.acquire(blocking=False), "two builds at once"
        builds.append(work)
        time.sleep(0.5)
        (work / "model").mkdir(parents=True)
        (work / "model" / "config.json").write_text("{}")
        inside.release()
        return work / "model"

    monkeypatch.setattr(tiny_preset, "build_tiny_into", slow_build)
    start, errors, results = threading.Barrier(2), [], []

    def run():
        start.wait()
        try:
            results.append(cached_tiny(tmp_path, MICRO))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(builds) == 1
    assert results[0] == results[1] and (results[0] / "config.json").exists()
    assert "waiting for another process building tiny-" in capsys.readouterr().err


def test_an_interrupted_build_says_the_next_use_continues_it(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the build printed only the build's own run's `--resume <cache>/.tiny-...`
    line, a hidden folder the user need not touch: the next use continues the build."""
    from rlvr.train import supervised

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(supervised, "sft_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cached_tiny(tmp_path, MICRO)
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        "tiny preset: build interrupted; the next command that uses tiny continues it "
        "(no --resume needed)"
    )
