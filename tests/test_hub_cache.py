"""The ``hub_cache`` fixture (tests/hub_cache.py) is a faithful Hugging Face cache: what
``transformers`` and ``datasets`` load from it with ``HF_HUB_OFFLINE`` set, in this process
and in a command a test starts, is what a machine that downloaded the repositories loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.hub_cache import COMMIT

ROWS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4)]]


def jsonl(rows: list[dict]) -> bytes:
    """Rows as the bytes of a JSON-lines file."""
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def test_the_cache_has_huggingface_hub_s_layout(hub_cache, tiny_model_dir):
    snapshot = hub_cache.model("org/tiny", tiny_model_dir)
    folder = hub_cache.hub / "models--org--tiny"
    assert (folder / "refs" / "main").read_text() == COMMIT
    assert snapshot == folder / "snapshots" / COMMIT
    config = snapshot / "config.json"
    assert config.is_symlink() and config.resolve().parent == folder / "blobs"


def test_transformers_and_datasets_load_from_it_offline(hub_cache, tiny_model_dir):
    import datasets
    import transformers
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE
    hub_cache.model("org/tiny", tiny_model_dir)
    hub_cache.dataset(
        "org/ds", {"data/train.jsonl": jsonl(ROWS), "data/test.jsonl": jsonl(ROWS[:1])}
    )
    model = transformers.AutoModelForCausalLM.from_pretrained("org/tiny")
    assert model.config.num_hidden_layers == 2
    loaded = datasets.load_dataset("org/ds")
    assert loaded["train"].to_list() == ROWS and loaded["test"].to_list() == ROWS[:1]
    with pytest.raises(ConnectionError):  # not in the cache: the Hub is not asked
        datasets.load_dataset("org/other")


def test_a_dataset_s_configs_load_as_its_readme_names_them(hub_cache):
    import datasets

    readme = "---\nconfigs:\n" + "".join(
        f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}.jsonl\n" for c in "ab"
    )
    files = {"README.md": f"{readme}---\n".encode(), "a.jsonl": jsonl(ROWS[:1])}
    hub_cache.dataset("org/two", files | {"b.jsonl": jsonl(ROWS[1:])}, configs=("a", "b"))
    assert datasets.load_dataset("org/two", "b", split="test").to_list() == ROWS[1:]


def test_a_command_started_by_a_test_reads_it(hub_cache, tiny_model_dir):
    hub_cache.model("org/tiny", tiny_model_dir)
    code = "import transformers; transformers.AutoConfig.from_pretrained('org/tiny')"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
