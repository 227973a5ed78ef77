"""What is checked before any stage runs (:mod:`rlvr.pipeline.checks`): later stages' configs,
files and models, data-stage options, finished stages made otherwise, the output directory."""

import importlib.util
import json
import re
import shutil

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import check_pipeline, parse_pipeline, read_pipeline, run_pipeline

from .helpers import DECON, DEDUP, LOG, KillAt, Killed, StopAtStart, _data_stages, _pipeline_file


def _two_stages(tmp_path, *later: str) -> dict:
    """An SFT stage on an existing file, then an RL stage with the overrides ``later``."""
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    first = ["data.train=" + str(tmp_path / "a.jsonl")]
    return {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": first},
            {"name": "b", "kind": "train", "config": "demo", "overrides": list(later)},
        ],
    }


def test_a_bad_override_of_a_later_stage_stops_the_pipeline_before_it_starts(tmp_path):
    with pytest.raises(ValueError, match="stage 'b': .*foo"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, "foo=1"), source="p.yaml"))
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_later_stage_that_could_not_start_stops_the_pipeline_before_it_starts(
    tmp_path, monkeypatch
):
    """A later stage is checked as its run will check it: its files, and this machine's."""
    import rlvr.train.preflight as preflight

    missing = str(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match=f"stage 'b': data.train: {missing}: no such file"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, f"data.train={missing}"), source="p"))
    monkeypatch.setattr(preflight, "sandbox_isolation", lambda verifier: "fallback-minimal")
    with pytest.raises(ValueError, match="stage 'b': .*reward.allow_unconfined=true"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, "reward.verifier=code"), source="p"))
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_later_stage_s_field_typo_stops_the_pipeline_before_it_starts(tmp_path):
    """The check found a later stage's missing data file but read none: a misspelt
    data.prompt_field (which `rlvr train --dry-run` finds) failed only once the earlier
    stages had run. Files an earlier data stage writes are not read before they exist."""
    rows = tmp_path / "q.jsonl"
    rows.write_text('{"question": "1 + 1", "answer": "2"}\n')
    typo = _two_stages(tmp_path, f"data.train={rows}", "data.prompt_field=questoin")
    with pytest.raises(ValueError, match=r"stage 'b': .*q\.jsonl:1: missing field 'questoin'"):
        run_pipeline(parse_pipeline(typo, source="p"))
    assert not (tmp_path / "pipe").exists()  # stage a never started
    produced = _two_stages(tmp_path, "data.train=@clean", "data.prompt_field=question")
    produced["stages"].insert(
        0, {"name": "clean", "kind": "data", "config": "dedup", "overrides": [f"input={rows}"]}
    )
    configs = check_pipeline(parse_pipeline(produced, source="p"))  # @clean is not read yet
    assert configs[-1].data.train == str((tmp_path / "pipe" / "clean" / "data.jsonl").absolute())


def test_the_files_model_replaces_a_missing_model_of_a_stage_config_in_the_check(
    tmp_path, tiny_model_dir, sft_file
):
    """The up-front check reads each stage with the model it will start from, not the model
    its config names (here a directory that does not exist, replaced by the file's)."""
    (tmp_path / "mine.yaml").write_text("base: sft\nmodel: {name: ./no-such-model}\n")
    stage = {"name": "warm", "kind": "sft", "config": str(tmp_path / "mine.yaml")}
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [stage | {"overrides": [f"data.train={sft_file}"]}],
    }
    with pytest.raises(Killed):  # the stage started: the check passed
        run_pipeline(
            parse_pipeline(data, source="p.yaml"),
            overrides=LOG,
            callbacks=lambda s: [StopAtStart()],
        )


def test_a_later_stages_config_model_is_not_checked_when_the_file_names_none(
    tmp_path, tiny_model_dir, sft_file
):
    """With no ``model`` in the file, the check read a later stage with the model its own
    config names, which its run never uses (it starts from the earlier stage's): a local
    model there that does not exist stopped the pipeline before its first stage."""
    (tmp_path / "mine.yaml").write_text("base: sft\nmodel: {name: ./no-such-model}\n")
    first = [f"model={tiny_model_dir}", f"data.train={sft_file}"]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": first},
            {"name": "b", "kind": "sft", "config": "./mine.yaml", "overrides": first[1:]},
        ],
    }
    pipeline = parse_pipeline(data, source="p.yaml", folder=tmp_path)
    _, later = check_pipeline(pipeline)
    assert later.model.name == str(tiny_model_dir)  # stands in for stage a's final model
    with pytest.raises(Killed):  # stage a started: the check passed
        run_pipeline(pipeline, overrides=LOG, callbacks=lambda s: [StopAtStart()])


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (
            {"name": "d2", "kind": "data", "config": "dedup", "overrides": ["input=./no.jsonl"]},
            r"stage 'd2': input: .*no\.jsonl: no such file",
        ),
        (
            {
                "name": "clean",
                "kind": "data",
                "config": "decontaminate",
                "overrides": ["against=[math500, ./nosuch.jsonl]"],
            },
            r"stage 'clean': against: .*nosuch\.jsonl: no such file",
        ),
        (
            {"name": "f", "kind": "data", "config": "filter", "overrides": ["keep=mean>0.5"]},
            "stage 'f': filter samples with a model: set the pipeline's model",
        ),
    ],
)
def test_a_dry_run_checks_the_files_and_model_of_data_stages(tmp_path, capsys, stage, message):
    """What would stop a data stage midway is refused before the first stage starts."""
    from rlvr.pipeline import check_pipeline

    data = _data_stages(tmp_path, None, DEDUP, stage)
    pipeline = parse_pipeline(data, source="p.yaml", folder=tmp_path)
    with pytest.raises(ValueError, match=message):
        check_pipeline(pipeline)
    with pytest.raises(ValueError, match=message):
        run_pipeline(pipeline, announce=lambda _: None)
    assert not (tmp_path / "pipe").exists()  # no stage ran
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    assert pipeline_main([str(path), "--dry-run"]) == 2
    assert "rlvr: error:" in capsys.readouterr().err


FILTER = {"name": "filter", "kind": "data", "config": "filter", "overrides": ["keep=mean<1"]}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("decon:ngram=abc", "ngram must be an integer, got 'abc'"),
        ("decon:ngram=0", "ngram must be >= 1, got 0"),
        ("decon:common=-1", "common must be >= 0, got -1"),
        ("decon:common=1", "common=1 cuts every n-gram an evaluation problem has"),
        ("decon:against=[1]", "against must be a string, got 1"),
        ("decon:against=", r"decontaminate needs against=\[SET, \.\.\.\]"),
        ("decon:field=2", "field must be a string, got 2"),
        ("filter:n=0", "n must be >= 1, got 0"),
        ("filter:batch_size=1.5", "batch_size must be an integer, got 1.5"),
        ("filter:max_tokens=0", "max_tokens must be >= 1, got 0"),
        ("filter:temperature=hot", "temperature must be a number, got 'hot'"),
        ("filter:temperature=-1", "temperature must be >= 0"),
        ("filter:top_p=0", r"top_p must be in \(0, 1\]"),
        ("filter:verifier=bogus", "unknown verifier 'bogus'"),
        ("decon:against=[@dedup]", "override 'against=.@dedup.': value is not valid YAML"),
        ("filter:system_prompt=@you", "override 'system_prompt=@you': value is not valid YAML"),
    ],
)
def test_bad_data_stage_options_are_refused_before_any_stage_runs(
    tmp_path, capsys, override, message
):
    """docs/pipelines.md: a data stage's options are checked before the first stage starts,
    in one line (a value of the wrong kind was a traceback, a bad value an error only when
    the stage ran, after the stages before it)."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, "smollm2-135m", DEDUP, DECON, FILTER)))
    assert pipeline_main([str(path), override]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.search(f"stage '{override.split(':')[0]}': {message}", line), line
    assert not (tmp_path / "pipe").exists()  # no stage ran


def test_a_filter_stage_takes_the_files_model_or_an_earlier_stages(tmp_path):
    from rlvr.pipeline import check_pipeline

    keep = {"name": "f", "kind": "data", "config": "filter", "overrides": ["keep=mean>0.5"]}
    missing = str(tmp_path / "no-model")
    with pytest.raises(ValueError, match=f"stage 'f': model: {missing}: no such directory"):
        check_pipeline(
            parse_pipeline(_data_stages(tmp_path, missing, DEDUP, keep), folder=tmp_path)
        )
    preset = _data_stages(tmp_path, "smollm2-135m", DEDUP, keep)
    assert check_pipeline(parse_pipeline(preset, folder=tmp_path)) == [None, None]
    sft = {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=@dedup"]}
    again = {**keep, "overrides": ["keep=mean>0.5", "input=@dedup"]}
    later = _data_stages(tmp_path, None, DEDUP, sft, again)
    checked = check_pipeline(parse_pipeline(later, folder=tmp_path))
    assert checked[0] is None and checked[1].data.train.endswith("dedup/data.jsonl")


def test_a_finished_stage_whose_options_changed_is_refused_not_skipped(tmp_path, capsys):
    """A finished stage records its options and input; a rerun that would make it otherwise
    names the stage, what changed and the folders to delete, and deletes nothing."""
    (tmp_path / "eval.jsonl").write_text('{"problem": "an unrelated question"}\n')
    clean = {
        "name": "clean",
        "kind": "data",
        "config": "decontaminate",
        "overrides": ["against=[./eval.jsonl]"],
    }
    data = _data_stages(tmp_path, None, DEDUP, clean)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "pipe"
    assert [r.status for r in run_pipeline(read_pipeline(str(path)), announce=print)] == ["ran"] * 2
    recorded = json.loads((out / "clean" / "stage.json").read_text())["options"]
    assert recorded["ngram"] == 9 and recorded["input"] == str(out / "dedup" / "data.jsonl")
    clean["overrides"].append("ngram=20")
    path.write_text(yaml.safe_dump(data))
    refused = rf"^stage 2/2 clean: finished with other options \(ngram: 9 -> 20\); .* {out}/clean$"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(read_pipeline(str(path)), announce=print)
    assert pipeline_main([str(path), "--dry-run"]) == 2  # the dry run says so too
    assert "clean: finished with other options (ngram: 9 -> 20)" in capsys.readouterr().err
    assert (out / "clean" / "stage.json").is_file()  # nothing deleted
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 2+2", "answer": "4"}\n')
    with pytest.raises(ValueError, match=rf"^stage 1/2 dedup: .*input_sha256: .*{out}/clean$"):
        run_pipeline(read_pipeline(str(path)), announce=print)
    shutil.rmtree(out / "dedup")
    with pytest.raises(ValueError, match=rf"dedup is not finished but later .* {out}/clean to"):
        run_pipeline(read_pipeline(str(path)), announce=print)


def test_an_option_added_to_or_removed_from_a_mapping_is_a_change():
    """reward.options recorded as {} and now holding extract (or the reverse) differ, though
    no key is on both sides; a key only one rlvr version has is not a change."""
    from rlvr.pipeline.checks import _changed

    empty, extract = {"reward.options": {}}, {"reward.options.extract": "flexible"}
    assert _changed(empty, extract) == ['reward.options.extract: null -> "flexible"']
    assert _changed(extract, empty) == ['reward.options.extract: "flexible" -> null']
    assert _changed({"steps": 3}, {"steps": 3, "rollout.new_key": 1}) == []


def test_a_finished_decontaminate_stage_whose_evaluation_files_changed_is_refused(tmp_path):
    """An evaluation problem added to an --against file (or folder) would drop other rows: the
    finished stage is not skipped on such a rerun; a file that is gone only skips it."""
    (tmp_path / "eval.jsonl").write_text('{"problem": "an unrelated question"}\n')
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "test.jsonl").write_text('{"problem": "another question"}\n')
    clean = {
        "name": "clean",
        "kind": "data",
        "config": "decontaminate",
        "overrides": ["against=[./eval.jsonl, ./evals]", "ngram=2"],
    }
    data = _data_stages(tmp_path, None, DEDUP, clean)
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 1+1"}\n{"prompt": "what is 3"}\n')
    pipeline = parse_pipeline(data, folder=tmp_path)
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["ran"] * 2
    out = tmp_path / "pipe"
    for edited in (tmp_path / "eval.jsonl", tmp_path / "evals" / "test.jsonl"):
        before = edited.read_text()
        edited.write_text(before + '{"problem": "what is 1+1"}\n')
        with pytest.raises(
            ValueError, match=rf"^stage 2/2 clean: .*against_sha256: .*{out}/clean$"
        ):
            run_pipeline(pipeline, announce=print)
        edited.write_text(before)
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["skipped"] * 2
    (tmp_path / "eval.jsonl").rename(tmp_path / "eval.bak")
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["skipped"] * 2


def test_a_finished_data_stage_whose_input_is_gone_is_still_skipped(tmp_path):
    """Its output stands; the input it was made from may have moved since."""
    data = _data_stages(tmp_path, None, {**DEDUP, "overrides": ["input=raw.jsonl"]})
    run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    (tmp_path / "raw.jsonl").rename(tmp_path / "raw.bak")
    again = run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    assert [r.status for r in again] == ["skipped"]


def test_a_stage_json_that_records_no_options_is_still_finished(tmp_path):
    """A stage finished before stage.json recorded options is taken as it is."""
    data = _data_stages(tmp_path, None, {**DEDUP, "overrides": ["input=raw.jsonl"]})
    run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    done = tmp_path / "pipe" / "dedup" / "stage.json"
    old = {k: v for k, v in json.loads(done.read_text()).items() if k != "options"}
    done.write_text(json.dumps(old))
    data["stages"][0]["overrides"].append("field=answer")
    again = run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    assert [r.status for r in again] == ["skipped"]


def test_a_dry_run_checks_each_stages_lora_targets_on_the_models_layers(
    tmp_path, tiny_model_dir, prompt_file, capsys
):
    """`rlvr pipeline --dry-run` passed a stage's `model.lora.targets=[nosuch]` (which
    `rlvr train --dry-run` refuses); the run stopped at that stage, after the ones before it.
    A later stage is checked on the first stage's model, whose architecture it starts from
    (here GPT-NeoX's layer names, where its own config names the `tiny` preset's Qwen2)."""
    import transformers

    neox = tmp_path / "neox"
    config = transformers.GPTNeoXConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32
    )
    config.vocab_size, config.bos_token_id, config.eos_token_id = 300, 0, 0
    transformers.GPTNeoXForCausalLM(config).save_pretrained(neox)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(neox)
    data = _two_stages(tmp_path, f"data.train={prompt_file}", "data.eval=null")
    data["stages"][0]["overrides"].append(f"model={neox}")  # stage b: the demo's tiny preset
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    lora = ["b:model.lora.rank=2"]
    assert (
        pipeline_main([str(path), "--dry-run", *lora, "b:model.lora.targets=[query_key_value]"])
        == 0
    )
    capsys.readouterr()
    for stage in ("a", "b"):
        argv = [str(path), "--dry-run", f"{stage}:model.lora.rank=2"]
        assert pipeline_main([*argv, f"{stage}:model.lora.targets=[q_proj]"]) == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(
            f"rlvr: error: {path}: stage '{stage}': model.lora.targets: this model has no "
            "layer named 'q_proj'; its linear layers and embeddings are embed_in, query_key_value,"
        ), line
    with pytest.raises(ValueError, match="stage 'b': model.lora.targets: .* no layer named 'q_"):
        run_pipeline(
            parse_pipeline(data, source="p"), overrides=[*lora, "b:model.lora.targets=[q_proj]"]
        )
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_dry_run_notes_lora_targets_it_cannot_check_as_rlvr_train_does(
    tmp_path, prompt_file, capsys, monkeypatch
):
    """On a preset not built yet, `rlvr train --dry-run` notes that the targets are not
    checked; `rlvr pipeline --dry-run` passed them without a word."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    data = _two_stages(tmp_path, f"data.train={prompt_file}", "data.eval=null")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data | {"model": "smollm2-135m"}))  # not built in this cache
    lora = ["b:model.lora.rank=4", "b:model.lora.targets=[nosuch]"]
    assert pipeline_main([str(path), "--dry-run", *lora]) == 0
    assert capsys.readouterr().err == (
        "--dry-run: stage 'b': model.lora: not checked against the layers of smollm2-135m "
        "(the run builds the preset first)\n"
    )
    assert not (tmp_path / "cache").exists()  # the preset was not built


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_filter_stage_sampler_without_its_package_is_refused_before_any_stage_runs(tmp_path):
    """``sampler=vllm`` on a filter stage where vLLM is not installed: the check before a run
    refuses it (it failed at that stage, after the stages before it had run); a dry run,
    perhaps for another machine, notes it."""
    from rlvr.pipeline import check_pipeline

    keep = {"name": "f", "kind": "data", "config": "filter"}
    keep["overrides"] = ["keep=mean>0.5", "sampler=vllm", "sampler_options={max_model_len: 64}"]
    pipeline = parse_pipeline(_data_stages(tmp_path, "smollm2-135m", DEDUP, keep), folder=tmp_path)
    with pytest.raises(ValueError, match="stage 'f': sampler=vllm: the vllm sampler needs vLLM"):
        check_pipeline(pipeline, device=True)
    said: list[str] = []
    assert check_pipeline(pipeline, note=said.append) == [None, None]
    assert said == [
        "stage 'f': sampler=vllm: the vllm sampler needs vLLM: pip install \"rlvr[vllm]\" on a "
        "GPU machine, or `make setup-vllm` for the CPU build (docs/training.md) (a run here "
        "would stop)"
    ]
    keep["overrides"][-1] = "sampler_options={memory: 1}"
    with pytest.raises(ValueError, match="stage 'f': sampler_options: unknown option.*memory for"):
        check_pipeline(
            parse_pipeline(_data_stages(tmp_path, "smollm2-135m", DEDUP, keep), folder=tmp_path)
        )


DECON_BAD = ["input=./bad.jsonl", "against=[./raw.jsonl]"]


FILTER_BAD = ["input=./bad.jsonl", "keep=mean<1"]


@pytest.mark.parametrize(
    ("name", "text", "step", "options", "message"),
    [
        ("bad.jsonl", "", "decontaminate", DECON_BAD, r"input: .*bad\.jsonl: no rows"),
        ("bad.jsonl", "x\n", "decontaminate", DECON_BAD, r"input: .*bad\.jsonl:1: invalid JSON"),
        ("bad.jsonl", '{"q": 1}\n', "dedup", DECON_BAD[:1], "no prompt field .* with field=NAME"),
        ("bad.csv", "a\n1\n", "dedup", ["input=./bad.csv"], r"unsupported file type '\.csv'"),
        ("bad.parquet", "x", "dedup", ["input=./bad.parquet"], r"input: .*bad\.parquet"),
        ("bad.jsonl", "", "filter", FILTER_BAD, r"input: .*bad\.jsonl: no rows"),
        ("bad.jsonl", '{"q": 1}\n', "filter", FILTER_BAD, "input: .*missing field 'prompt'"),
        ("bad.jsonl", "", "decontaminate", ["against=[./bad.jsonl]"], "against: .*no rows"),
    ],
)
def test_a_data_stage_s_unreadable_input_is_refused_before_any_stage_runs(
    tmp_path, tiny_model_dir, capsys, name, text, step, options, message
):
    """An empty, malformed or unreadable input (or `against` file) of a data stage passed the
    check and `--dry-run` (only that the file exists was checked) and stopped the pipeline
    when the stage ran, after the stages before it (here an SFT stage)."""
    (tmp_path / name).write_text(text)
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    stages = [
        {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=./a.jsonl"]},
        {"name": "clean", "kind": "data", "config": step, "overrides": options},
    ]
    if not any(o.startswith("input=") for o in options):  # the first data stage needs one
        stages[1]["overrides"] = ["input=./raw.jsonl", *options]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, str(tiny_model_dir), *stages)))
    capsys.readouterr()
    for args in ([str(path), "--dry-run"], [str(path)]):
        assert pipeline_main(args) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert re.search(rf"^rlvr: error: .*p\.yaml: stage 'clean': .*{message}", line), line
    assert not (tmp_path / "pipe").exists()  # the SFT stage did not run


@pytest.mark.parametrize("under", ["", "sub"])
def test_an_output_directory_that_is_a_file_is_refused_before_any_stage_runs(
    tmp_path, tiny_model_dir, capsys, under
):
    """A file as `-o` (or a folder under one) was found only as a stage wrote: a data stage
    after the stages before it, an SFT stage naming `log.output_dir`, which no one set."""
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    sft = {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=./a.jsonl"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, str(tiny_model_dir), sft)))
    (tmp_path / "taken").write_text("a file\n")
    out = tmp_path / "taken" / under if under else tmp_path / "taken"
    capsys.readouterr()
    for dry in (["--dry-run"], []):
        assert pipeline_main([str(path), "-o", str(out), *dry]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert (
            line
            == f"rlvr: error: output directory {out}: {tmp_path / 'taken'} is a file, not a directory"
        )


def test_an_interrupted_stage_after_a_stage_to_rerun_is_named_with_the_folders_to_delete(
    tmp_path, tiny_model_dir, sft_file, prompt_file
):
    """A finished stage with other options named only the finished folders after it to delete:
    a later stage interrupted with checkpoints was left, and after the earlier stage ran
    again it resumed from a checkpoint trained from the earlier stage's old model."""
    pipeline = read_pipeline(str(_pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file)))
    out = tmp_path / "pipe"
    with pytest.raises(Killed):  # warm finished, math stopped after a checkpoint
        run_pipeline(
            pipeline,
            callbacks=lambda s: [KillAt(2)] if s.name == "math" else [],
            announce=lambda _: None,
        )
    assert any((out / "math" / "checkpoints").glob("step_*"))
    refused = rf"^stage 1/3 warm: finished with other options .* delete {out}/warm, {out}/math$"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(pipeline, overrides=["warm:batch_size=2"], announce=lambda _: None)
    shutil.rmtree(out / "warm")  # as told before: only warm, so math would resume
    refused = rf"^stage 1/3 warm is not finished but later stages .* delete {out}/math to"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(pipeline, overrides=["warm:batch_size=2"], announce=lambda _: None)
    assert not (out / "warm").exists()
