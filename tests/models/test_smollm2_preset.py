"""The ``smollm2-135m`` preset's build (the GGUF conversion itself replaced by a fake)."""

from __future__ import annotations

import json
from pathlib import Path

import transformers

from rlvr.models import smollm2


class _Saved:
    """Stands in for a tokenizer, a config and a model: ``save_pretrained`` writes one file."""

    def __init__(self, name: str, on_load=None):
        self.name, self.on_load = name, on_load
        self.config = self
        self.generation_config = None

    def save_pretrained(self, out) -> None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / self.name).write_text(json.dumps({"by": self.name}))

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state) -> None:
        pass


def _fake_transformers(monkeypatch, during_load) -> None:
    """GGUF loading that runs ``during_load()`` (another process) while the model loads."""
    calls = []

    def load_model(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            during_load()
        return _Saved("config.json")

    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Saved("tokenizer.json")
    )
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", load_model)
    monkeypatch.setattr(
        transformers.AutoModelForCausalLM, "from_config", lambda c: _Saved("config.json")
    )


def test_two_first_uses_at_once_both_get_the_converted_model(tmp_path, monkeypatch):
    """Both wrote into one ``smollm2-135m.tmp``: the later build deleted the earlier's files
    and its rename failed (``rlvr compare --jobs 2`` with a cold cache)."""
    cache = tmp_path / "cache"
    monkeypatch.setattr(smollm2, "_smollm2_gguf", lambda: tmp_path / "model.gguf")
    other: list[Path] = []
    _fake_transformers(monkeypatch, lambda: other.append(smollm2.build_smollm2(cache)))
    mine = smollm2.build_smollm2(cache)
    assert mine == other[0] == cache / "smollm2-135m"
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "tokenizer.json"]
    assert [p.name for p in cache.iterdir()] == ["smollm2-135m"]  # no work directory left
    assert mine.stat().st_mode & 0o777 == 0o755


def test_the_docs_name_the_quantisation_the_preset_comes_from():
    """docs/training.md said "dequantised" without saying from how many bits."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    quantisation = smollm2.SMOLLM2_GGUF.removesuffix(".gguf").rsplit(".", 1)[1]  # "Q4_1"
    assert f"`{smollm2.SMOLLM2_GGUF}`" in docs and f"(`{quantisation}`)" in docs
