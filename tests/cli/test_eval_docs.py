"""docs/evaluation.md's `rlvr eval` table names every option the command takes."""

from pathlib import Path

from rlvr.cli.eval import _default_output
from rlvr.cli.eval_args import eval_parser

DOC = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text()


def test_every_eval_option_is_in_the_docs_table():
    table = DOC.split("| option | meaning |", 1)[1].split("\n\n", 1)[0]
    options = [
        flag
        for action in eval_parser()._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    ]
    missing = [flag for flag in options if f"`{flag}" not in table]
    assert not missing, f"docs/evaluation.md's option table lacks {missing}"


def test_the_json_example_has_the_keys_rlvr_eval_writes(tiny_model_dir, tmp_path):
    """The documented JSON lacked top-level and metric keys that the file holds."""
    import json
    from importlib import resources

    from rlvr.cli.eval import main

    block = DOC.split("## `rlvr eval`", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    documented = json.loads(block)
    out = tmp_path / "eval.json"
    data_file = resources.files("rlvr") / "assets" / "math-mini.jsonl"
    argv = ["--model", str(tiny_model_dir), "--data", str(data_file), "-n", "8", "-k", "1", "8",
            "--max-tokens", "2", "--limit", "1", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    written = json.loads(out.read_text())
    assert set(documented) == set(written)
    assert set(documented["metrics"]) == set(written["metrics"])
    assert set(documented["problems"][0]) == set(written["problems"][0])
    for key in ("id", "dataset", "reference"):  # the default mapping's id is the row number
        assert documented["problems"][0][key] == written["problems"][0][key], key


def test_the_default_output_names_an_adapter_folder_by_its_checkpoint(tmp_path):
    folder = tmp_path / "step_000060" / "adapter"
    folder.mkdir(parents=True)
    assert _default_output(str(folder)).name.startswith("adapter-")
    (folder / "adapter_config.json").write_text("{}")
    assert _default_output(str(folder) + "/").name.startswith("step_000060-adapter-")
    assert _default_output("tiny").parent == Path("runs") / "eval"


def test_the_default_output_names_a_checkpoint_by_its_run(tmp_path):
    """Every run has a step_000060: the name says whose."""
    step = tmp_path / "demo-20261122-101500" / "checkpoints" / "step_000060"
    assert _default_output(str(step)).name.startswith("demo-20261122-101500-step_000060-")
    (step / "adapter").mkdir(parents=True)
    (step / "adapter" / "adapter_config.json").write_text("{}")
    adapter = _default_output(str(step / "adapter")).name
    assert adapter.startswith("demo-20261122-101500-step_000060-adapter-")


def test_the_help_names_what_the_docs_table_names():
    """`--help` left .json files out of --data, and the folder rule out of --split."""
    helps = {a.option_strings[0]: a.help for a in eval_parser()._actions if a.option_strings}
    assert "a .jsonl/.json/.parquet file" in helps["--data"]
    assert "a local folder or hub dataset of several splits needs one" in helps["--split"]
