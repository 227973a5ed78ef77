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


def _tiny_llama_marked_gguf():
    config = transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    model = transformers.LlamaForCausalLM(config)
    model.config.quantization_config = {"quant_method": "gguf"}  # as GGUF loading marks it
    return model


def test_the_converted_config_has_no_quantization_config(tmp_path, monkeypatch):
    """It was saved as ``null``, which transformers 5.10 (verl's pin) reads as a quantised model:
    the preset failed to load there with an AttributeError; a copy already cached is mended."""
    monkeypatch.setattr(
        transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Saved("tokenizer.json")
    )
    monkeypatch.setattr(
        transformers.AutoModelForCausalLM,
        "from_pretrained",
        lambda *a, **k: _tiny_llama_marked_gguf(),
    )
    smollm2._convert(tmp_path / "model.gguf", tmp_path / "out")
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "quantization_config" not in config and config["hidden_size"] == 8

    cached = tmp_path / "cache" / "smollm2-135m"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text(json.dumps({**config, "quantization_config": None}))
    assert smollm2.build_smollm2(tmp_path / "cache") == cached
    assert json.loads((cached / "config.json").read_text()) == config


def test_the_first_build_says_what_it_does_and_a_built_copy_says_nothing(
    tmp_path, monkeypatch, capsys
):
    """Minutes of conversion showed only transformers' GGUF progress bar, naming no preset."""
    monkeypatch.setattr(smollm2, "_smollm2_gguf", lambda: tmp_path / smollm2.SMOLLM2_GGUF)
    _fake_transformers(monkeypatch, lambda: None)
    built = smollm2.build_smollm2(tmp_path / "cache")
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        f"smollm2-135m preset: converting {smollm2.SMOLLM2_GGUF} once into {built} "
        "(a few minutes on a CPU; later runs read the copy)"
    ]
    smollm2.build_smollm2(tmp_path / "cache")
    assert capsys.readouterr().err == ""
