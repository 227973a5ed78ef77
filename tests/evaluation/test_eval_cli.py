"""`rlvr eval` end to end on CPU with a tiny random model and a bundled problem file."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
import torch

from rlvr.cli import main as rlvr_main
from rlvr.cli.eval import main
from rlvr.evaluation import pass_at_k
from rlvr.evaluation.majority import maj_at_k
from rlvr.models import torch_device

ASSETS = resources.files("rlvr") / "assets"


def test_eval_writes_json_and_avg_matches_problems(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = [
        "--model", str(tiny_model_dir),
        "--data", str(ASSETS / "math-mini.jsonl"),
        "--data", f"{ASSETS / 'chain_sum-mini.jsonl'}::reasoning_gym",
        "-n", "3", "-k", "1", "2", "--max-tokens", "8", "--temperature", "1.0",
        "--seed", "1", "--limit", "3", "--output", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    assert "avg@3" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert set(data) == {
        "model",
        "data",
        "verifier",
        "verifier_options",
        "loading",
        "weights",
        "sampler",
        "command",
        "versions",
        "metrics",
        "per_dataset",
        "stderr",
        "per_dataset_stderr",
        "config",
        "prompts",
        "problems",
    }
    assert data["loading"]["device"] == str(torch_device("auto"))  # the default, as it ran
    # the installed distribution's, not reasoning_gym.__version__ (0.1.19 on 0.1.25)
    assert data["versions"]["reasoning-gym"] == importlib.metadata.version("reasoning-gym")
    assert data["versions"]["math-verify"] == importlib.metadata.version("math-verify")
    assert set(data["per_dataset"]) == {"math-mini", "chain_sum-mini"}
    assert set(data["per_dataset_stderr"]) == {"math-mini", "chain_sum-mini"}
    assert len(data["problems"]) == 6
    problems = data["problems"]
    for p in problems:
        assert set(p) >= {
            "id",
            "dataset",
            "prompt",
            "reference",
            "scores",
            "correct",
            "completions",
            "status",
            "n",
            "c",
        }
        assert p["n"] == 3 == len(p["completions"]) and p["c"] == sum(p["correct"])
    for k in (1, 2, 3):
        avg = sum(p["c"] / p["n"] for p in problems) / len(problems)
        assert abs(data["metrics"][f"avg@{k}"] - avg) < 1e-12
    for k in (1, 2):
        expected = sum(pass_at_k(p["n"], p["c"], k) for p in problems) / len(problems)
        assert abs(data["metrics"][f"pass@{k}"] - expected) < 1e-12
        values = [pass_at_k(p["n"], p["c"], k) for p in problems]
        mean = sum(values) / len(values)
        spread = sum((v - mean) ** 2 for v in values) / (len(values) - 1)  # ddof 1
        assert abs(data["stderr"][f"pass@{k}"] - (spread / len(values)) ** 0.5) < 1e-12
    assert data["config"]["sampling"]["max_new_tokens"] == 8 and data["config"]["n"] == 3


def test_maj_at_k_is_in_the_table_and_the_json_recomputable_from_the_votes(
    tiny_model_dir, tmp_path, capsys
):
    """maj@k for each k, from each completion's answer key (problems[].answers) and verdict."""
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "chain_sum-mini.jsonl"),
            "--verifier", "reasoning_gym", "-n", "4", "-k", "1", "2", "4", "--max-tokens", "6",
            "--temperature", "1.0", "--limit", "4", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    rows = [
        line.split("│")[1].strip() for line in capsys.readouterr().out.splitlines() if "│" in line
    ]
    assert rows[rows.index("pass@2") + 1] == "maj@2"
    data = json.loads(out.read_text())
    problems = data["problems"]
    assert all(len(p["answers"]) == 4 for p in problems)
    for k in (1, 2, 4):
        values = [maj_at_k(p["answers"], p["correct"], k) for p in problems]
        assert data["metrics"][f"maj@{k}"] == pytest.approx(sum(values) / 4, abs=1e-12)
        assert data["stderr"][f"maj@{k}"] is None or data["stderr"][f"maj@{k}"] >= 0
    assert [k for k in data["metrics"] if k.startswith("maj@")] == ["maj@1", "maj@2", "maj@4"]


def test_the_table_shows_the_share_of_truncated_completions(tiny_model_dir, tmp_path, capsys):
    """Completions cut at --max-tokens are scored as they stand (mostly wrong): the table gave
    avg@k without a word of it, the share only in the JSON's response/clipped_frac."""
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
            "-n", "2", "--max-tokens", "2", "--limit", "2", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "truncated %" in line)
    clipped = json.loads(out.read_text())["metrics"]["response/clipped_frac"]
    assert row.split()[-2] == f"{100 * clipped:.1f}" and clipped > 0


def test_the_json_names_the_source_that_scored_it(tiny_model_dir, tmp_path, monkeypatch):
    """`versions.rlvr` is 0.1.0 on every commit: two reports made by other rlvr code, or
    scored by another version of your own verifier module, read the same. `rlvr-source`
    hashes rlvr's source (as `rlvr compare` does) and `<module>-source` that module's file."""
    from rlvr.compare.worker import code_hash

    (tmp_path / "myverify.py").write_text(
        "from rlvr.rewards.registry import register\n\n\n@register('exact_eval_test')\n"
        "def exact(completion, reference):\n    return float(completion.strip() == reference)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
            "--verifier", "myverify.exact_eval_test", "--workers", "0", "-n", "1", "--max-tokens", "2",
            "--limit", "1", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    versions = json.loads(out.read_text())["versions"]
    assert versions["rlvr-source"] == code_hash() and len(code_hash()) == 12
    assert len(versions["myverify-source"]) == 12
    out2 = tmp_path / "eval2.json"
    assert main([*argv[:5], "math", *argv[6:-1], str(out2)]) == 0
    assert not any(
        k.endswith("-source") and k != "rlvr-source"
        for k in json.loads(out2.read_text())["versions"]
    )


def test_an_earlier_report_is_not_replaced(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """An --output holding a report is refused before anything loads (also by --dry-run), and
    the report is kept; an evaluation stopped before removing its partial samples finishes."""
    from rlvr.evaluation.partial import PartialSamples, partial_path

    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
            "-n", "1", "--max-tokens", "2", "--limit", "1", "--output", str(out)]  # fmt: skip
    with monkeypatch.context() as patched:  # stopped between writing the report and the removal
        patched.setattr(PartialSamples, "remove", lambda self: None)
        assert main(argv) == 0
    assert partial_path(out).is_file()
    assert main(argv) == 0  # its own evaluation: continued, finished
    assert not partial_path(out).exists()
    before = out.read_bytes()
    for extra in ([], ["--dry-run"]):
        assert main([*argv, *extra]) == 2
        assert "holds an earlier report, which this evaluation would replace" in (
            capsys.readouterr().err
        )
    assert out.read_bytes() == before
    assert main([*argv, "--show-prompts", "1"]) == 0  # writes nothing


def test_eval_is_reproducible_under_seed(tiny_model_dir, tmp_path):
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in outs:
        argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"), "-n", "2",
                "--max-tokens", "6", "--limit", "2", "--seed", "3", "--output", str(out)]  # fmt: skip
        assert main(argv) == 0
    a, b = (json.loads(o.read_text())["problems"] for o in outs)
    assert [p["completions"] for p in a] == [p["completions"] for p in b]


def test_eval_reports_bad_input(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": \n')
    argv = [
        "--model",
        str(tiny_model_dir),
        "--data",
        str(bad),
        "--output",
        str(tmp_path / "o.json"),
    ]
    assert main(argv) == 2
    assert "bad.jsonl:2: invalid JSON" in capsys.readouterr().err
    assert main(["--model", str(tiny_model_dir), "--data", str(bad), "--verifier", "nope"]) == 2
    assert main(["--model", str(tiny_model_dir), "--data", str(bad), "-n", "2", "-k", "4"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("rlvr: error: -k 4: k must be between 1 and -n (2)")
    )


@pytest.mark.parametrize("flag", ["-n", "--limit", "--batch-size", "--max-tokens"])
def test_a_count_below_one_is_refused_by_its_flag(flag, capsys):
    """`-n 0` said "n must be >= 1, got 0" and `--limit 0` "limit must be >= 1", naming no
    flag (`--batch-size 0`: "batch_size"); argparse now names it, before anything loads."""
    with pytest.raises(SystemExit) as stop:
        main(["--model", "tiny", "--data", "x.jsonl", flag, "0"])
    assert stop.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == f"rlvr eval: error: argument {flag}: expected a whole number >= 1, got '0'"


def test_eval_extract_option_is_applied_and_recorded(tiny_model_dir, tmp_path):
    """--extract flexible scores the last number, and the JSON says so."""
    from rlvr.rewards import get_verifier

    out = tmp_path / "eval.json"
    argv = [
        "--model", str(tiny_model_dir),
        "--data", f"{ASSETS / 'chain_sum-mini.jsonl'}::reasoning_gym", "--verifier", "reasoning_gym",
        "--extract", "flexible", "-n", "2", "--max-tokens", "8", "--limit", "4", "--output", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert data["verifier"] == "reasoning_gym" and data["verifier_options"] == {
        "extract": "flexible"
    }
    flexible = get_verifier("reasoning_gym", extract="flexible")
    for p in data["problems"]:
        assert p["scores"] == [flexible(c, p["reference"]) for c in p["completions"]]


def test_format_verifier_options_are_the_options_given(tiny_model_dir, tmp_path):
    """With +format, verifier_options held the inner verifier's repr (a memory address) in
    place of --wrong."""
    out = tmp_path / "eval.json"
    argv = [
        "--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
        "--verifier", "math+format", "--wrong", "-1", "-n", "1", "--max-tokens", "2",
        "--limit", "1", "--output", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert data["verifier"] == "math+format" and data["verifier_options"] == {"wrong": -1.0}


def test_the_json_names_the_mapping_the_verifier_chose(tiny_model_dir, tmp_path):
    """With --verifier reasoning_gym and no --fields the rows were read with the reasoning_gym
    mapping, but loading.fields said null (the default mapping)."""
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "chain_sum-mini.jsonl"),
            "--verifier", "reasoning_gym", "-n", "1", "--max-tokens", "2", "--limit", "1",
            "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(out.read_text())["loading"]["fields"] == "reasoning_gym"


def test_an_unwritable_output_is_refused_before_evaluating(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """--output under a file (or naming a directory) failed only after the whole evaluation."""
    import rlvr.evaluation.harness

    def evaluate(*args, **kwargs):
        raise AssertionError("evaluated although the report could not be written")

    monkeypatch.setattr(rlvr.evaluation.harness, "evaluate", evaluate)
    (tmp_path / "file").write_text("")
    for output in (tmp_path / "file" / "eval.json", tmp_path):
        argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
                "--output", str(output)]  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("rlvr: error: --output") and str(output) in err
        assert len(err.strip().splitlines()) == 1


def test_a_correct_score_not_above_the_wrong_one_is_refused(tiny_model_dir, tmp_path, capsys):
    """--correct 0 (with the default --wrong 0) counted every wrong completion as correct:
    avg@k and pass@k of 100% for any model."""
    for scores in (["--correct", "0"], ["--correct", "-1", "--wrong", "0"]):
        argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
                "--limit", "1", "-n", "1", "--max-tokens", "2", "--output", str(tmp_path / "o.json"),
                *scores]  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("rlvr: error: --correct") and "--wrong" in err and "\n" not in err
    assert not (tmp_path / "o.json").exists()


def test_completions_the_verifier_failed_on_are_reported(tiny_model_dir, tmp_path, capsys):
    """A verifier that raised on every completion (here: code tests expected, a number given)
    printed avg@k = 0 and 'verifier timeouts 0', with no word that nothing was verified."""
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
            "--verifier", "code", "--workers", "0", "-n", "2", "--max-tokens", "2",
            "--limit", "2", "--output", str(out)]  # fmt: skip
    with pytest.warns(UserWarning, match="could not be verified") as caught:
        assert main(argv) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "verifier failures" in line)
    assert row.split()[-2] == "4"  # the table's cell, before the closing border
    (warning,) = [str(w.message) for w in caught if "could not be verified" in str(w.message)]
    assert "4 of 4 completions, of 2 of 2 problems," in warning
    assert "reference: expected" in warning  # the verifier's own message
    problems = json.loads(out.read_text())["problems"]
    assert all(len(p["errors"]) == 2 and all(p["errors"]) for p in problems)


def test_the_unverified_warning_says_how_many_problems_they_belong_to():
    """The warning "2 of 6 completions could not be verified" read the same for one problem
    whose reference the verifier cannot read (every one of its completions) and for failures
    spread over problems; the warning names the problems too."""
    from rlvr.cli.eval import warn_unverified
    from rlvr.evaluation import EvalConfig, ProblemResult, build_report

    def problem(pid, status):
        return ProblemResult(
            id=pid, dataset="d", prompt="p", reference="r", scores=[0.0, 0.0],
            correct=[False, False], lengths=[1, 1], truncated=[False, False], status=status,
            errors=[None if s == "ok" else "boom" for s in status],
        )  # fmt: skip

    problems = [
        problem("a", ["error", "timeout"]),
        problem("b", ["ok", "ok"]),
        problem("c", ["ok", "ok"]),
    ]
    with pytest.warns(UserWarning, match=r"^2 of 6 completions, of 1 of 3 problems, could not"):
        warn_unverified(build_report(problems, EvalConfig(n=2, ks=(1,))))


def test_sources_with_the_same_file_name_keep_their_own_column(tiny_model_dir, tmp_path):
    """Two --data files both called test.jsonl were merged into one 'test' column, their
    problems given the same ids: the per-dataset numbers mixed two sets."""
    sources = []
    for folder, (a, b) in {"math": (1, 1), "gsm": (3, 3)}.items():
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "test.jsonl"
        path.write_text(json.dumps({"prompt": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n")
        sources.append(str(path))
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", sources[0], "--data", sources[1],
            "-n", "1", "--max-tokens", "2", "--output", str(out)]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert sorted(data["per_dataset"]) == sorted(sources)
    assert [p["dataset"] for p in data["problems"]] == sources
    assert len({p["id"] for p in data["problems"]}) == 2


def test_a_source_given_twice_is_refused(tiny_model_dir, capsys):
    source = str(ASSETS / "math-mini.jsonl")
    argv = ["--model", str(tiny_model_dir), "--data", source, "--data", source]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"rlvr: error: --data {source} is given twice"
    assert main([*argv, "--dry-run"]) == 2  # the dry run checks what the run would
    assert capsys.readouterr().err.strip() == f"rlvr: error: --data {source} is given twice"


def test_one_file_spelt_two_ways_is_refused(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """`--data test.jsonl --data ./test.jsonl` evaluated the file twice, counted twice in 'all'."""
    monkeypatch.chdir(tmp_path)
    Path("test.jsonl").write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    argv = ["--model", str(tiny_model_dir), "--data", "test.jsonl", "--data", "./test.jsonl",
            "--dry-run"]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == "rlvr: error: --data test.jsonl is given twice"


def test_a_folder_of_several_splits_needs_split(tmp_path, capsys):
    """A folder holding train.jsonl and test.jsonl was evaluated on its train split unasked."""
    folder = tmp_path / "data"
    folder.mkdir()
    for split, count in (("train", 3), ("test", 2)):
        rows = [json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) for i in range(count)]
        (folder / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    argv = ["--model", "m", "--data", str(folder), "--output", str(tmp_path / "o.json"),
            "--dry-run"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlvr: error: {folder}: holds the splits train, test; name one with --split"
    assert main([*argv, "--split", "test"]) == 0
    assert f"{folder}: 2 problems" in capsys.readouterr().out
    assert main([*argv, "--split", "dev"]) == 2  # datasets' "Unknown split" named no option
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(": no split 'dev'; its splits: train, test; name one with --split")


@pytest.mark.parametrize(
    ("source", "gen"),
    [("reasoning_gym:chain_sum", "chain_sum"), ("code_tasks:all", "code_tasks:all")],
)
def test_a_generated_training_source_says_how_to_write_it(
    source, gen, capsys, tiny_model_dir, tmp_path, monkeypatch
):
    """`--data reasoning_gym:chain_sum`, as in a training config, passed the dry run and then
    failed as a hub dataset that could not be reached. The advice is followed to the letter:
    the file it has written is evaluated (it said "give the file", whose fields then failed)."""
    for extra in ([], ["--dry-run"]):
        assert main(["--model", "m", "--data", source, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"rlvr: error: --data {source}: a generated set is a training")
        assert f"(rlvr data gen {gen} --size 200 -o heldout.jsonl)" in err
    monkeypatch.chdir(tmp_path)
    gen_args, _, use = err.removesuffix(")").partition("(rlvr data gen ")[2].partition(") ")
    assert rlvr_main(["data", "gen", *gen_args.replace("200", "4").split()]) == 0
    advised = use.partition("(")[2].split()
    small = ["--limit", "2", "--max-tokens", "4", "-n", "1"]
    assert main(["--model", str(tiny_model_dir), *advised, *small]) == 0, capsys.readouterr().err


def test_a_file_with_its_own_field_names_is_evaluated(tiny_model_dir, tmp_path, capsys):
    """A held-out file with `question` / `solution` fields could not be read: `--fields` takes only
    named mappings and the error did not say what to pass."""
    data = tmp_path / "heldout.jsonl"
    data.write_text(
        '{"question": "1 + 1 =", "solution": "2"}\n{"question": "2 + 2 =", "solution": "4"}\n'
    )
    out = tmp_path / "eval.json"
    base = ["--model", str(tiny_model_dir), "--data", str(data), "-n", "1", "--max-tokens", "2",
            "--output", str(out)]  # fmt: skip
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: ") and len(err.splitlines()) == 1
    assert "missing field 'prompt'" in err and "--prompt-field" in err and "--answer-field" in err
    assert main([*base, "--prompt-field", "question", "--answer-field", "solution"]) == 0
    written = json.loads(out.read_text())
    assert [p["reference"] for p in written["problems"]] == ["2", "4"]
    assert written["loading"]["prompt_field"] == "question"
    out.unlink()
    assert main([*base, "--prompt-field", "question", "--fields", "amc23"]) == 2
    assert "--prompt-field" in capsys.readouterr().err


def test_a_file_naming_one_problem_twice_is_warned_of(tiny_model_dir, tmp_path):
    """A reasoning-gym file with a row given twice was evaluated without a word: that problem
    counted twice, and `--against` this report later failed with "a report names one problem
    twice", naming neither."""
    rows = (ASSETS / "chain_sum-mini.jsonl").read_text().splitlines()[:2]
    data = tmp_path / "heldout.jsonl"
    data.write_text("\n".join([*rows, rows[0]]) + "\n")
    out = tmp_path / "eval.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(data), "--verifier", "reasoning_gym",
            "-n", "1", "--max-tokens", "2", "--output", str(out)]  # fmt: skip
    said = r"1 of 3 problems repeat .*first: heldout/chain_sum-0-0"
    with pytest.warns(UserWarning, match=said):
        assert main(argv) == 0
    assert json.loads(out.read_text())["metrics"]["num_problems"] == 3
    out.unlink()
    with pytest.warns(UserWarning, match=said):  # the dry run reads the file: it says so too
        assert main([*argv, "--dry-run"]) == 0


def test_a_dry_run_refuses_a_model_directory_that_does_not_exist(tmp_path, capsys):
    """`rlvr eval --dry-run --model ./typo` printed the plan and exited 0; the run then failed."""
    missing = tmp_path / "no-such-model"
    argv = ["--model", str(missing), "--data", str(ASSETS / "math-mini.jsonl"), "--dry-run"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlvr: error: --model {missing}: no such directory"


def test_an_interrupted_evaluation_continues_and_its_kept_samples_go(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """Ctrl-C lost every sampled batch; the rerun with the same --output now continues from
    them (same numbers as a whole run), refuses other settings in one line, and the kept file
    goes once the report is written."""
    import rlvr.evaluation.harness as harness

    out = tmp_path / "eval.json"
    argv = [
        "--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
        "-n", "2", "--max-tokens", "6", "--temperature", "1.0", "--batch-size", "1",
        "--limit", "3", "--output",
    ]  # fmt: skip
    assert main([*argv, str(tmp_path / "whole.json")]) == 0
    whole = json.loads((tmp_path / "whole.json").read_text())
    real = harness.sample

    def killed_after_one_batch(sampler, prompt_ids, config, *, done=None, on_batch=None, **rest):
        def then_stop(samples):
            on_batch(samples)
            raise KeyboardInterrupt

        return real(sampler, prompt_ids, config, done=done, on_batch=then_stop, **rest)

    monkeypatch.setattr(harness, "sample", killed_after_one_batch)
    assert main([*argv, str(out)]) == 130
    err = capsys.readouterr().err
    assert (
        f"interrupted after sampling 1 of 3 problems: the same command with --output {out}" in err
    )
    assert (tmp_path / "eval.partial.pt").exists() and not out.exists()
    monkeypatch.setattr(harness, "sample", real)
    assert main([*argv, str(out), "--seed", "5"]) == 2  # other settings: not mixed in
    assert "an interrupted evaluation with other settings (seed)" in capsys.readouterr().err
    assert main([*argv, str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["problems"] == whole["problems"] and again["metrics"] == whole["metrics"]
    assert not (tmp_path / "eval.partial.pt").exists()


def test_sigterm_says_how_to_continue_as_ctrl_c_does(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """A scheduler's stop (SIGTERM) ended the evaluation at once (exit 143) without the line
    saying that the same command continues from the kept samples."""
    import os
    import signal

    import rlvr.evaluation.harness as harness

    out = tmp_path / "eval.json"
    argv = [
        "--model", str(tiny_model_dir), "--data", str(ASSETS / "math-mini.jsonl"),
        "-n", "2", "--max-tokens", "6", "--batch-size", "1", "--limit", "3", "--output", str(out),
    ]  # fmt: skip
    real = harness.sample

    def stopped_after_one_batch(sampler, prompt_ids, config, *, done=None, on_batch=None, **rest):
        def then_sigterm(samples):
            on_batch(samples)
            os.kill(os.getpid(), signal.SIGTERM)

        return real(sampler, prompt_ids, config, done=done, on_batch=then_sigterm, **rest)

    monkeypatch.setattr(harness, "sample", stopped_after_one_batch)
    assert main(argv) == 143
    err = capsys.readouterr().err
    assert (
        f"interrupted after sampling 1 of 3 problems: the same command with --output {out}" in err
    )
    assert (tmp_path / "eval.partial.pt").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_a_checkpoint_of_a_run_with_another_verifier_is_warned_of(tmp_path, capsys):
    """`rlvr eval --model <run>/checkpoints/step_N` without --verifier scored with `math`
    without a word when the run trained with another verifier (your own `mine.exact`), so its
    numbers were not the run's; it warns, naming the verifier to give."""
    import warnings

    checkpoint = tmp_path / "run" / "checkpoints" / "step_000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "tokenizer.json").write_text("{}")
    (tmp_path / "run" / "config.yaml").write_text("reward: {verifier: mine.exact}\n")
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    argv = ["--model", str(checkpoint), "--data", str(data), "--dry-run"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
        said = [str(w.message) for w in caught]
        assert len(said) == 1 and "trained with reward.verifier=mine.exact" in said[0], said
        assert "give --verifier mine.exact" in said[0]
        caught.clear()
        assert main([*argv, "--verifier", "math"]) == 0  # chosen: no warning
        (tmp_path / "run" / "config.yaml").write_text("reward: {verifier: math}\n")
        assert main(argv) == 0
        assert not caught


def test_one_sample_per_problem_reads_in_the_singular(tmp_path, capsys):
    """`rlvr eval -n 1` printed '1 samples per problem'."""
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "tokenizer.json").write_text("{}")
    assert main(["--model", str(model), "--data", str(data), "-n", "1", "--dry-run"]) == 0
    assert f"{model}: not loaded; 1 sample per problem, k [1]" in capsys.readouterr().out
    assert main(["--model", str(model), "--data", str(data), "-n", "2", "--dry-run"]) == 0
    assert "2 samples per problem" in capsys.readouterr().out


def _checkpoint_and_data(tmp_path: Path, config: str) -> tuple[Path, Path]:
    """A run folder with ``config`` as its config.yaml and an empty step_000004, and a file."""
    checkpoint = tmp_path / "run" / "checkpoints" / "step_000004"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "tokenizer.json").write_text("{}")
    (tmp_path / "run" / "config.yaml").write_text(config)
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    return checkpoint, data


def _sampling(argv: list[str]):
    """The evaluation settings ``rlvr eval argv`` samples with."""
    from rlvr.cli.eval import _config
    from rlvr.cli.eval_args import eval_parser
    from rlvr.cli.eval_run import resolve_sampling

    args = eval_parser().parse_args(argv)
    resolve_sampling(args)
    return _config(args)


RUN_EVAL = (
    "rollout: {max_new_tokens: 64}\n"
    "eval: {n: 2, ks: [1, 2], temperature: 1.0, top_p: 0.9, seed: 77, batch_size: 3}\n"
)


def test_a_checkpoint_samples_as_its_run_evaluated(tmp_path, capsys):
    """`rlvr eval --model <run>/checkpoints/step_N` sampled with rlvr eval's defaults (T 0.6,
    256 tokens, -n 4, seed 0), not the run's eval settings, so it did not give the run's
    held-out numbers and said nothing; it now takes each option not given from the run's
    config.yaml (max tokens: eval.max_new_tokens, else the rollout's) and says so."""
    checkpoint, data = _checkpoint_and_data(tmp_path, RUN_EVAL)
    argv = ["--model", str(checkpoint), "--data", str(data)]
    assert main([*argv, "--dry-run"]) == 0
    line, *_ = capsys.readouterr().err.splitlines()  # a note, like the run's data line
    assert line.startswith(f"rlvr eval: sampling as the run evaluated ({tmp_path / 'run'}")
    assert "n=2, k 1 2, T=1.0, top p 0.9, max tokens 64, seed 77, batch size 3; give -n" in line
    config = _sampling(argv)
    assert (config.n, config.ks, config.seed, config.batch_size) == (2, (1, 2), 77, 3)
    assert config.sampling.temperature == 1.0 and config.sampling.top_p == 0.9
    assert config.sampling.max_new_tokens == 64


def test_a_flag_given_beats_the_runs_setting(tmp_path, capsys):
    """A sampling flag given is used, and the line no longer names it; -n given drops the
    run's k values (they belong to its n)."""
    checkpoint, data = _checkpoint_and_data(tmp_path, RUN_EVAL)
    base = ["--model", str(checkpoint), "--data", str(data)]
    config = _sampling([*base, "--temperature", "0.3", "--seed", "0", "-n", "1"])
    assert config.sampling.temperature == 0.3 and config.seed == 0
    assert (config.n, config.ks, config.sampling.max_new_tokens) == (1, (1,), 64)
    line = capsys.readouterr().err
    assert "T=" not in line and "seed" not in line and "max tokens 64" in line
    explicit = ["-n", "4", "-k", "1", "--temperature", "0.6", "--top-p", "1.0"]
    explicit += ["--max-tokens", "256", "--seed", "0", "--batch-size", "8"]
    _sampling([*base, *explicit])
    assert capsys.readouterr().out == ""  # every option given: nothing taken, nothing said


def test_a_plain_model_directory_keeps_the_defaults(tmp_path, capsys):
    """A model that is no run's checkpoint (or a run without an eval section) samples with
    rlvr eval's own defaults, silently."""
    checkpoint, data = _checkpoint_and_data(tmp_path, "reward: {verifier: math}\n")
    for model in (checkpoint, tmp_path / "run" / "checkpoints"):
        config = _sampling(["--model", str(model), "--data", str(data)])
        assert (config.n, config.ks, config.seed, config.batch_size) == (4, (1, 4), 0, 8)
        assert config.sampling.temperature == 0.6 and config.sampling.max_new_tokens == 256
        assert config.sampling.top_p == 1.0
    assert capsys.readouterr().out == ""


def _even_length(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def _register_even_length() -> None:
    from rlvr.rewards import register

    register("eval_cli_even")(_even_length)


_register_even_length()

HELD_OUT = [{"question": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(4) for b in range(3)]  # fmt: skip

TINY_RUN = """\
steps: 1
threads: 1
model: {{name: {model}}}
data:
  train: {held}
  eval: held.jsonl
  eval_prompt_field: question
  eval_answer_field: solution
  template: "Q: {{prompt}}"
  system_prompt: Answer briefly.
  max_eval_examples: 10
  max_prompt_tokens: 64
reward: {{verifier: eval_cli_even, wrong: -1.0}}
rollout: {{prompts_per_step: 2, group_size: 4, max_new_tokens: 8}}
optim: {{lr: 0.001}}
log: {{output_dir: {out}, tensorboard: false, progress: "off", plots: false}}
eval: {{n: 3, ks: [1, 3], at_start: false, temperature: 1.0, seed: 5, batch_size: 4}}
"""


def _tiny_run(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A one-step ``rlvr train`` run of the tiny random model whose held-out evaluation has its
    own fields, limit, template, system prompt, verifier and wrong score; its checkpoint."""
    held = tmp_path / "held.jsonl"
    held.write_text("".join(json.dumps(row) + "\n" for row in HELD_OUT))
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"prompt": r["question"], "answer": "1"}) + "\n" for r in HELD_OUT))  # fmt: skip
    config = tmp_path / "run.yaml"
    out = tmp_path / "run"
    config.write_text(TINY_RUN.format(model=tiny_model_dir, held=train, out=out))
    assert rlvr_main(["train", "--config", str(config)]) == 0
    return out / "checkpoints" / "step_000001"


def test_a_checkpoint_alone_evaluates_its_runs_held_out_set_as_the_run_did(
    tiny_model_dir, tmp_path, capsys
):
    """`rlvr eval --model <run>/checkpoints/step_N` without --data was refused (--data is
    required): the run's held-out set, fields, limit, template, system prompt, verifier and
    scores had to be typed again. It now takes them from the run's config.yaml, says so in
    one line, and gives the numbers the run printed at its last evaluation."""
    checkpoint = _tiny_run(tiny_model_dir, tmp_path)
    capsys.readouterr()
    out = tmp_path / "eval.json"
    assert main(["--model", str(checkpoint), "--output", str(out)]) == 0
    line = capsys.readouterr().err.splitlines()[1]  # after the sampling line
    assert line.startswith("rlvr eval: problems and verifier as the run evaluated (")
    for taken in (f"data.eval {tmp_path / 'held.jsonl'}", "data.max_eval_examples 10",
                  "fields question/solution", "data.template 'Q: {prompt}'",
                  "data.system_prompt 'Answer briefly.'", "reward.verifier eval_cli_even",
                  "reward.wrong -1.0, reward.timeout_s 10.0; give --data, --limit, --fields, --template"):  # fmt: skip
        assert taken in line, (taken, line)
    written = json.loads(out.read_text())
    *_, last = (json.loads(row) for row in (tmp_path / "run" / "metrics.jsonl").open())
    run = {key.removeprefix("eval/"): v for key, v in last.items() if key.startswith("eval/")}
    assert run["num_problems"] == 10 and 0 < run["avg@1"] < 1 and run["score/mean"] < 0.5
    assert {key: written["metrics"][key] for key in run} == run
    assert written["data"] == [str(tmp_path / "held.jsonl")]
    assert written["verifier"] == "eval_cli_even"
    assert written["verifier_options"] == {"correct": 1.0, "wrong": -1.0}
    assert written["loading"]["template"] == "Q: {prompt}" and written["loading"]["limit"] == 10
    assert written["problems"][0]["prompt"] == "Q: What is 0 + 0?"
    assert written["config"]["system_prompt"] == "Answer briefly."


def test_a_runs_own_evaluation_report_is_a_base_for_against(tiny_model_dir, tmp_path, capsys):
    """A run's held-out evaluations were lost with it; each is now <run>/eval_reports/step_N.json in
    rlvr eval's format, so a model can be paired with the run's: its last checkpoint, on its
    own held-out set, against its last evaluation differs by exactly 0."""
    checkpoint = _tiny_run(tiny_model_dir, tmp_path)
    base = tmp_path / "run" / "eval_reports" / "step_000001.json"
    out = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["--model", str(checkpoint), "--against", str(base), "--output", str(out)]) == 0
    said = capsys.readouterr().out
    # the run's policy and its checkpoint are the same weights: its difference is no finding
    noise = "percentage points, 95%; sampling noise, not a finding"
    assert f"against {base}, paired by problem ({noise}): avg@3 +0.0 [+0.0, +0.0]; " in said
    written, run = json.loads(out.read_text()), json.loads(base.read_text())
    assert written["weights"] == run["weights"] and written["against"]["same_weights"] is True
    assert written["prompts"] == run["prompts"]  # its prompts as the run tokenised them
    assert (
        written["against"]["all"]["avg@3"]["mean"]
        == 0
        == written["against"]["all"]["pass@3"]["mean"]
    )
    assert written["against"]["all"]["avg@3"]["problems"] == 10
    assert run["metrics"] == written["metrics"] and run["verifier"] == written["verifier"]
    assert set(written) - set(run) == {"command", "versions", "against"}
    assert set(run) - set(written) == {"run", "step"}


RUN_WITH_HELD_OUT = """\
data: {train: ../qa.jsonl, eval: ../qa.jsonl, max_eval_examples: 1, template: "Q: {prompt}"}
reward: {verifier: math+format, options: {format_penalty: -0.5}}
"""


def from_run(argv: list[str]):
    """What ``rlvr eval argv`` takes from the run (``None``: nothing), and its arguments."""
    from rlvr.cli.eval_args import eval_parser
    from rlvr.cli.eval_run import from_run

    parser = eval_parser()
    args = parser.parse_args(argv)
    return from_run(args, parser), args


def test_a_flag_given_beats_the_runs_data_and_verifier(tmp_path, capsys):
    """Each flag given replaces the run's value (the line then leaves it out); --verifier also
    drops the run's verifier options, which belong to its verifier."""
    checkpoint, data = _checkpoint_and_data(tmp_path, RUN_WITH_HELD_OUT)
    data.write_text("".join(json.dumps({"q": f"{i} + 1 =", "a": str(i + 1)}) + "\n" for i in range(3)))  # fmt: skip
    run, args = from_run(["--model", str(checkpoint), "--prompt-field", "q", "--answer-field", "a"])
    assert run.reward.verifier == "math+format" and run.reward.options == {"format_penalty": -0.5}
    assert run.config.data.template == "Q: {prompt}" and args.template == "Q: {prompt}"
    line = capsys.readouterr().err
    assert "data.max_eval_examples 1" in line and "fields" not in line
    given = ["--limit", "2", "--template", "{prompt} =", "--system-prompt", "Be brief."]
    given += ["--verifier", "math", "--wrong", "-1", "--fields", "default", "--split", "train"]
    run, args = from_run(["--model", str(checkpoint), *given])
    held = run.config.data.held_out()
    assert (held.fields, held.max_eval_examples, held.eval_split) == ("default", 2, "train")
    assert (held.template, held.system_prompt) == ("{prompt} =", "Be brief.")
    assert (run.reward.verifier, run.reward.wrong, run.reward.options) == ("math", -1.0, {})
    assert (args.data, args.limit, args.split) == ([str(data)], 2, "train")
    line = capsys.readouterr().err
    assert line.endswith(
        f"data.eval {data}, reward.correct 1.0, reward.timeout_s 10.0; give --data, --correct, "
        "--timeout to change\n"
    )
    assert main(["--model", str(checkpoint), "--dry-run", "--prompt-field", "q", "--answer-field", "a"]) == 0  # fmt: skip
    assert f"{data}: 1 problems\n" in capsys.readouterr().out  # the run's limit
    assert main(["--model", str(checkpoint), "--dry-run", "--limit", "9"]) == 2  # its own fields
    assert "missing field 'prompt'" in capsys.readouterr().err


def test_a_model_that_is_no_runs_checkpoint_still_needs_data(tmp_path, capsys):
    """Without --data, a model that is no run's checkpoint is refused as argparse refused it,
    saying that a run's checkpoint would need none."""
    checkpoint, _ = _checkpoint_and_data(tmp_path, RUN_WITH_HELD_OUT)
    (tmp_path / "run" / "config.yaml").unlink()  # a model folder of no run
    with pytest.raises(SystemExit) as stop:
        main(["--model", str(checkpoint), "--dry-run"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert (
        "rlvr eval: error: the following arguments are required: --data (unless --model is " in err
    )
    assert "<run>/checkpoints/step_N" in err


@pytest.mark.parametrize("given", ["run", "run/", "run/checkpoints"])
def test_a_run_directory_without_data_names_its_checkpoint(tmp_path, capsys, given):
    """`rlvr eval --model runs/demo-...` (the run, not its checkpoint) said --data was required,
    as if a run could not be evaluated on its own held-out set: one line names the checkpoint."""
    checkpoint, _ = _checkpoint_and_data(tmp_path, RUN_WITH_HELD_OUT)
    assert main(["--model", str(tmp_path / given)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rlvr: error: --model {tmp_path / given}"), err
    assert (
        f"holds no model (no config.json); a run's models are its checkpoints, e.g. {checkpoint}\n"
        in err
    )


@pytest.mark.parametrize("dry", [[], ["--dry-run"]])
def test_a_run_directory_as_data_is_one_line_before_anything_loads(tmp_path, capsys, dry):
    """`--data runs/demo-...` read the run's metrics and reports as rows (`datasets` printing
    its "Generating test split" lines) and then failed on their columns ("missing field
    'prompt'"); now one line, first, names the checkpoint to give instead."""
    checkpoint, _ = _checkpoint_and_data(tmp_path, RUN_WITH_HELD_OUT)
    run = tmp_path / "run"
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    (run / "eval_reports").mkdir()
    (run / "eval_reports" / "step_000000.json").write_text('{"step": 0, "metrics": {}}')
    argv = ["--model", "m", "--data", str(run), "--split", "test",
            "--output", str(tmp_path / "o.json"), *dry]  # fmt: skip
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"rlvr: error: --data {run}: an rlvr run's directory, not data; to evaluate on its "
        f"held-out set give its checkpoint and no --data (--model {checkpoint})\n"
    )


def test_against_a_report_a_run_did_not_write_says_why(tmp_path, capsys):
    """A run with eval.reports=false has no eval_reports/: `--against` one of them says that
    the run wrote none, not only 'no such file'."""
    checkpoint, _ = _checkpoint_and_data(tmp_path, RUN_WITH_HELD_OUT + "eval: {reports: false}\n")
    base = tmp_path / "run" / "eval_reports" / "step_000000.json"
    argv = ["--model", str(checkpoint), "--against", str(base), "--dry-run"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (
        f"rlvr: error: --against {base}: no such file: the run wrote no evaluation reports "
        f"(eval.reports: false in {tmp_path / 'run' / 'config.yaml'}); for a base, evaluate the "
        "model it started from with rlvr eval --output BASE.json"
    )
    (tmp_path / "run" / "config.yaml").write_text(RUN_WITH_HELD_OUT)  # reports written, one gone
    assert main(argv) == 2
    assert (
        capsys.readouterr().err.splitlines()[-1] == f"rlvr: error: --against {base}: no such file"
    )


def test_a_checkpoint_path_that_is_not_there_is_named_without_data(tmp_path, capsys):
    """A mistyped checkpoint path without --data: 'no such directory', not '--data required'."""
    missing = tmp_path / "runs" / "demo-typo" / "checkpoints" / "step_000060"
    assert main(["--model", str(missing)]) == 2
    assert capsys.readouterr().err == f"rlvr: error: --model {missing}: no such directory\n"


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("data: {train: qa.jsonl}\n", "its run ({run}) had no held-out set (data.eval is not set): give --data"),
        ("data: {train: qa.jsonl, response_field: r}\n", "{run} is an rlvr sft run, with no problems to verify; give --data"),
        ("data: {train: qa.jsonl, eval: qa.jsonl}\nsteps: 0\n", "config.yaml: steps must be >= 1, got 0; give --data"),
    ],
)  # fmt: skip
def test_a_run_without_a_held_out_set_asks_for_data(tmp_path, capsys, config, said):
    checkpoint, _ = _checkpoint_and_data(tmp_path, config)
    assert main(["--model", str(checkpoint), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said.format(run=tmp_path / "run") in err, err


def test_with_data_the_runs_prompt_options_are_warned_of(tmp_path, capsys):
    """With --data on a run's checkpoint the prompts stay as given (as the verifier does), and a
    warning names the run's template and system prompt that no flag gives."""
    import warnings

    config = 'data: {train: qa.jsonl, template: "Q: {prompt}", system_prompt: Be brief.}\n'
    checkpoint, data = _checkpoint_and_data(tmp_path, config)
    argv = ["--model", str(checkpoint), "--data", str(data), "--verifier", "math", "--dry-run"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
        said = [str(w.message) for w in caught]
        assert len(said) == 1, said
        assert (
            "prompted with data.template='Q: {prompt}', data.system_prompt='Be brief.'" in said[0]
        )
        assert "give --template, --system-prompt to prompt as the run did" in said[0]
        caught.clear()
        assert main([*argv, "--template", "{prompt}", "--system-prompt", "Hi."]) == 0
        assert not caught


def test_a_dry_run_names_the_runs_generated_held_out_set(tmp_path, capsys):
    """A run whose data.eval is a generated set: the dry run names its size and seed (the
    run's data.gym), and generates nothing."""
    config = (
        "data: {train: reasoning_gym:chain_sum, eval: reasoning_gym:chain_sum,\n"
        "  gym: {eval_size: 50, eval_seed: 7}, max_eval_examples: 20}\n"
        "reward: {verifier: 'reasoning_gym:chain_sum'}\n"
    )
    checkpoint, _ = _checkpoint_and_data(tmp_path, config)
    assert main(["--model", str(checkpoint), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "reasoning_gym:chain_sum: 20 problems, generated as the run's (seed 7)\n" in out
    assert "data.eval reasoning_gym:chain_sum, data.max_eval_examples 20" in err
    assert "reward.verifier reasoning_gym:chain_sum, reward.correct 1.0" in err


def test_a_runs_generated_held_out_set_is_named_by_its_source(
    tiny_model_dir, tmp_path, monkeypatch
):
    """The per-dataset key of a run's generated held-out set was its cache file's stem
    (``chain_sum-n200-s3000000-6d5261daa4``) while the JSON's ``data`` said
    ``reasoning_gym:chain_sum``."""
    import argparse

    from rlvr.cli.eval_run import FromRun, held_out
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import from_dict

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    data = {"train": "reasoning_gym:chain_sum", "eval": "reasoning_gym:chain_sum"}
    data["gym"] = {"train_size": 4, "eval_size": 3}
    cfg = from_dict(TrainConfig, {"model": {"name": str(tiny_model_dir)}, "data": data})
    args = argparse.Namespace(model=str(tiny_model_dir), max_tokens=8)
    prompts = held_out(FromRun(tmp_path / "config.yaml", cfg, cfg.reward), args).prompts
    assert [p.example.dataset for p in prompts] == ["reasoning_gym:chain_sum"] * 3


def test_a_checkpoint_of_a_half_precision_run_loads_as_the_run_did(tmp_path, capsys):
    """A run whose policy was bfloat16 evaluated in bfloat16; rlvr eval loaded its checkpoint
    in float32 (other numbers), unless --dtype was given."""
    checkpoint, data = _checkpoint_and_data(tmp_path, RUN_EVAL + "model: {dtype: bfloat16}\n")
    argv = ["--model", str(checkpoint), "--data", str(data)]
    assert _dtype(argv) == "bfloat16"
    assert "dtype bfloat16" in capsys.readouterr().err
    assert _dtype([*argv, "--dtype", "float32"]) == "float32"


def _dtype(argv: list[str]) -> str:
    from rlvr.cli.eval_args import eval_parser
    from rlvr.cli.eval_run import resolve_sampling

    args = eval_parser().parse_args(argv)
    resolve_sampling(args)
    return args.dtype


def test_a_runs_held_out_file_without_its_fields_names_evals_flags(tmp_path, capsys):
    """Evaluating a run's held-out set, a missing field named the run's config keys
    (data.eval_prompt_field), which rlvr eval takes no word of; it names the flags now."""
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps({"q": "1 + 1 =", "a": "2"}) + "\n")
    checkpoint, _ = _checkpoint_and_data(tmp_path, f"data: {{train: {held}, eval: {held}}}\n")
    assert main(["--model", str(checkpoint), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "missing field 'prompt'" in err and "--prompt-field / --answer-field" in err
    assert "data.eval_" not in err


def test_a_dry_run_of_a_runs_held_out_file_naming_one_problem_twice_warns(tmp_path):
    """The dry run reads a run's local held-out file as the evaluation will: a problem given
    twice is warned of there too, before anything loads."""
    rows = (ASSETS / "chain_sum-mini.jsonl").read_text().splitlines()[:2]
    held = tmp_path / "held.jsonl"
    held.write_text("\n".join([*rows, rows[1]]) + "\n")
    config = f"data: {{train: {held}, eval: {held}, eval_fields: reasoning_gym}}\n"
    checkpoint, _ = _checkpoint_and_data(tmp_path, config)
    with pytest.warns(UserWarning, match=r"1 of 3 problems repeat .*first: held/chain_sum-0-1"):
        assert main(["--model", str(checkpoint), "--dry-run"]) == 0


@dataclass(frozen=True)
class _SpyOptions:
    """Options of the spy sampler."""

    tag: str = ""
    """Recorded, changes nothing."""


class _SpySampler:
    """The lean sampler, recording the options it was made with, its calls and its release."""

    made: list = []  # noqa: RUF012 (one list for the test)

    def __init__(self, model, tokenizer, options: _SpyOptions) -> None:
        from rlvr.generation import make_sampler

        self.lean, self.options, self.calls, self.closed = (
            make_sampler("lean", model, tokenizer),
            options,
            0,
            False,
        )
        _SpySampler.made.append(self)

    def generate(self, prompt_ids, *, n, sampling):
        self.calls += 1
        return self.lean.generate(prompt_ids, n=n, sampling=sampling)

    def sync_weights(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def spy_sampler():
    from rlvr.generation import SAMPLERS, register_sampler

    register_sampler("eval_cli_spy", options=_SpyOptions)(_SpySampler)
    _SpySampler.made.clear()
    yield _SpySampler.made
    SAMPLERS.pop("eval_cli_spy")


def test_eval_samples_with_the_sampler_named_and_records_it(
    tiny_model_dir, tmp_path, capsys, spy_sampler
):
    """`rlvr eval` sampled with the lean sampler only (a vLLM run's numbers could not be
    reproduced, and a GPU node could not evaluate on vLLM); --sampler names one,
    --sampler-option fills its options (as YAML values), the JSON records both, and the
    sampler is released after."""
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    out = tmp_path / "e.json"
    argv = ["--model", str(tiny_model_dir), "--data", str(data), "-n", "2", "--max-tokens", "4"]
    assert (
        main(
            [
                *argv,
                "--sampler",
                "eval_cli_spy",
                "--sampler-option",
                "tag=abc",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    [made] = spy_sampler
    assert made.options == _SpyOptions(tag="abc")
    assert made.calls == 1 and made.closed
    assert json.loads(out.read_text())["sampler"] == {
        "name": "eval_cli_spy",
        "options": {"tag": "abc"},
    }
    assert "T=0.6, sampler eval_cli_spy" in capsys.readouterr().out
    lean = tmp_path / "lean.json"
    assert main([*argv, "--output", str(lean)]) == 0
    assert json.loads(lean.read_text())["sampler"] == {"name": "lean", "options": {}}


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--sampler", "nope"], "--sampler: unknown sampler 'nope'; valid: "),
        (["--sampler-option", "x"], "--sampler-option expects key=value, got 'x'"),
        (["--sampler-option", "fast=true", "--sampler-option", "fast=false"], "--sampler-option fast is given twice; give it once"),
        (["--sampler", "vllm", "--sampler-option", "memory=1"], "--sampler-option: unknown option(s) memory for sampler 'vllm'; valid: gpu_memory_utilization"),
        (["--sampler", "vllm", "--sampler-option", "max_model_len=abc"], "--sampler-option: option max_model_len of sampler 'vllm' must be int or None, got 'abc'"),
    ],
)  # fmt: skip
def test_a_bad_sampler_or_option_is_one_line_before_anything_loads(
    tmp_path, capsys, monkeypatch, flags, said
):
    import rlvr.models

    monkeypatch.setattr(rlvr.models, "load_model", _never)
    checkpoint, data = _checkpoint_and_data(tmp_path, "reward: {verifier: math}\n")
    assert main(["--model", str(checkpoint), "--data", str(data), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlvr: error: {said}") and err.count("\n") == 1, err


def _never(*args, **kwargs):
    raise AssertionError("the model was loaded")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_sampler_without_its_package_stops_before_the_model_loads(tmp_path, capsys, monkeypatch):
    """`--sampler vllm` where vLLM is not installed: one line before anything loads (it failed
    after the model had loaded); a dry run, perhaps for another machine, notes it."""
    import rlvr.models

    monkeypatch.setattr(rlvr.models, "load_model", _never)
    checkpoint, data = _checkpoint_and_data(tmp_path, "reward: {verifier: math}\n")
    argv = ["--model", str(checkpoint), "--data", str(data), "--sampler", "vllm"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        'rlvr: error: --sampler vllm: the vllm sampler needs vLLM: pip install "rlvr[vllm]" on a '
        "GPU machine, or `make setup-vllm` for the CPU build (docs/training.md)\n"
    )
    assert main([*argv, "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "--dry-run: --sampler vllm: the vllm sampler needs vLLM" in captured.err
    assert "(a run here would stop)" in captured.err
    assert captured.out.rstrip().endswith("sampler vllm")


def _resolved(argv: list[str]):
    from rlvr.cli.eval_args import eval_parser
    from rlvr.cli.eval_run import resolve_sampling

    args = eval_parser().parse_args(argv)
    resolve_sampling(args)
    return args.sampler, args.sampler_options


def test_a_checkpoint_samples_with_its_runs_sampler(tmp_path, capsys):
    """A run's evaluations sample with its rollout.sampler: a checkpoint of a run with another
    sampler than lean is evaluated with it and its options (the options given laid over
    them), and the line says so; --sampler given drops the run's options (they are its
    sampler's)."""
    run = (
        RUN_EVAL
        + "rollout: {max_new_tokens: 64, sampler: vllm, sampler_options: {kv_cache_gib: 2.0}}\n"
    )
    checkpoint, data = _checkpoint_and_data(
        tmp_path, run.replace("rollout: {max_new_tokens: 64}\n", "")
    )
    base = ["--model", str(checkpoint), "--data", str(data)]
    assert _resolved(base) == ("vllm", {"kv_cache_gib": 2.0})
    assert "batch size 3, sampler vllm; give -n, -k" in capsys.readouterr().err
    more = [*base, "--sampler-option", "max_model_len=128"]
    assert _resolved(more) == ("vllm", {"kv_cache_gib": 2.0, "max_model_len": 128})
    capsys.readouterr()
    assert _resolved([*base, "--sampler", "hf"]) == ("hf", {})
    assert "sampler" not in capsys.readouterr().err
    lean, _ = _checkpoint_and_data(tmp_path / "lean", RUN_EVAL)
    assert _resolved(["--model", str(lean), "--data", str(data)]) == ("lean", {})


def test_a_checkpoint_alone_scores_within_its_runs_time_limit(tmp_path, capsys):
    """Without --data the verifier's time limit is the run's reward.timeout_s (the code
    recipe's 30 s; rlvr eval scored with 10 s, so slow right programs timed out and the run's
    numbers did not come out again); --timeout given wins."""
    run = RUN_WITH_HELD_OUT.replace("reward: {", "reward: {timeout_s: 30.0, ")
    checkpoint, _ = _checkpoint_and_data(tmp_path, run)
    run, args = from_run(["--model", str(checkpoint)])
    assert run.reward.timeout_s == 30.0 and args.timeout == 30.0
    assert "reward.timeout_s 30.0" in capsys.readouterr().err
    run, args = from_run(["--model", str(checkpoint), "--timeout", "5"])
    assert run.reward.timeout_s == 5.0 and args.timeout == 5.0
    assert "timeout" not in capsys.readouterr().err
    assert (
        _sampling(
            ["--model", str(checkpoint), "--data", "x.jsonl", "--timeout", "5"]
        ).scoring.timeout_s
        == 5.0
    )


def test_against_an_earlier_report_prints_and_records_the_paired_differences(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """`--against BASE.json`: the avg@k / pass@k differences from an earlier report of the
    same problems, paired by problem, printed under the table and recorded in the JSON; a
    report of other problems or another verifier is refused before the model loads."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n" for i in range(5)))  # fmt: skip
    argv = ["--model", str(tiny_model_dir), "--data", str(data), "-n", "2", "--max-tokens", "4"]
    base, again = tmp_path / "base.json", tmp_path / "again.json"
    assert main([*argv, "--output", str(base)]) == 0
    assert main([*argv, "--output", str(again), "--against", str(base)]) == 0  # the same samples
    out = capsys.readouterr().out
    assert f"against {base}, paired by problem (percentage points, 95%; sampling noise, not a finding): avg@2 +0.0 [+0.0, +0.0]; pass@2 +0.0 [+0.0, +0.0]; maj@2 +0.0 [+0.0, +0.0]\n" in out  # fmt: skip
    assert "the same way, so any difference is sampling noise (seed) and not a difference of models\n" in out  # fmt: skip
    recorded = json.loads(again.read_text())["against"]
    assert recorded["same_weights"] is True and recorded["noise_only"] is True
    assert recorded["other_settings"] == {}
    assert recorded["file"] == str(base) and recorded["all"]["avg@2"]["mean"] == 0
    assert recorded["all"]["avg@2"]["problems"] == 5
    assert set(recorded["all"]) == {"avg@2", "pass@2", "maj@2"}  # math's answer keys: maj@k
    assert recorded["per_dataset"] == {"qa": recorded["all"]}
    assert "  qa: " not in out  # one dataset: no line of its own
    import rlvr.models

    monkeypatch.setattr(rlvr.models, "load_model", _never)
    for flags, said in [
        (["--limit", "3"], "the reports hold other problems (3 and 5, 3 in both)"),
        (["--verifier", "math+format"], "scored with verifier 'math', this with 'math+format'"),
    ]:
        fresh = tmp_path / "refused.json"
        assert main([*argv, *flags, "--output", str(fresh), "--against", str(base)]) == 2
        assert capsys.readouterr().err == f"rlvr: error: --against {base}: {said}" + (
            ": give --verifier math to compare\n" if "verifier" in said else
            ": evaluate the same data with the same --limit\n"
        )  # fmt: skip
    assert main([*argv, "--against", str(data), "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith(f"rlvr: error: --against {data}: not an rlvr eval")


def test_against_the_same_weights_says_what_the_difference_measures(
    tiny_model_dir, tmp_path, capsys
):
    """Two evaluations of one checkpoint were compared as two models are, p-value and all.
    The reports now record a fingerprint of the weights (not their path: a copy elsewhere is
    the same weights) and the settings that change the scores: under another seed the
    difference is a noise floor (no p-value); at another temperature, the temperature's
    (warned, tested); other weights are compared as models."""
    import shutil

    from rlvr.models import load_model

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n" for i in range(5)))  # fmt: skip
    copy = shutil.copytree(tiny_model_dir, tmp_path / "copy")
    argv = ["--data", str(data), "-n", "2", "--max-tokens", "4"]
    base = tmp_path / "base.json"
    assert main(["--model", str(tiny_model_dir), *argv, "--output", str(base)]) == 0
    digest = json.loads(base.read_text())["weights"]["sha256"]
    capsys.readouterr()
    against = ["--model", str(copy), *argv, "--against", str(base)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*against, "--seed", "1", "--output", str(tmp_path / "seed.json")]) == 0
        said = capsys.readouterr().out
        assert (
            f"both reports evaluated the same weights ({digest[:12]}) the same way but for the "
            "seed 1 against 0: the difference measures sampling noise (a noise floor), not a "
            "difference of models\n"
        ) in said
        assert "95%; sampling noise, not a finding): avg@2 " in said and "] p " not in said
        assert not [w for w in caught if "sampled differently" in str(w.message)]
        assert main([*against, "--temperature", "1.0", "--output", str(tmp_path / "T.json")]) == 0
    assert [str(w.message) for w in caught if "sampled differently" in str(w.message)] == [
        "the reports were sampled differently: temperature 1.0 against 0.6; part of the "
        "difference may be that"
    ]
    said = capsys.readouterr().out
    assert "sampled otherwise: the difference is the settings', not the models'\n" in said
    assert "(percentage points, 95%): avg@2 " in said and "] p " in said
    model, tokenizer = load_model(str(tiny_model_dir))
    with torch.no_grad():
        next(model.parameters())[0, 0] += 1e-3
    model.save_pretrained(tmp_path / "other")
    tokenizer.save_pretrained(tmp_path / "other")
    other = tmp_path / "other.json"
    argv = ["--model", str(tmp_path / "other"), *argv, "--against", str(base)]
    assert main([*argv, "--output", str(other)]) == 0
    said = capsys.readouterr().out
    assert "same weights" not in said and "(percentage points, 95%): avg@2 " in said
    assert json.loads(other.read_text())["against"]["same_weights"] is False


def test_against_with_several_datasets_gives_a_line_for_each():
    from rlvr.cli.eval_against import paired

    problems = [
        {"dataset": d, "id": str(i), "reference": "1", "n": 2, "c": c}
        for d, i, c in [("a", 0, 2), ("a", 1, 0), ("b", 0, 1), ("b", 1, 1)]
    ]
    new = {"verifier": "math", "problems": problems}
    base = {"verifier": "math", "problems": [{**p, "c": 1} for p in problems]}
    section, lines = paired("base.json", new, base)
    assert set(section["per_dataset"]) == {"a", "b"} and section["all"]["avg@2"]["problems"] == 4
    assert lines[0].startswith("against base.json, paired by problem") and len(lines) == 3
    assert (
        lines[1].startswith("  a: avg@2 +0.0 [")
        and lines[2] == "  b: avg@2 +0.0 [+0.0, +0.0] p 1; pass@2 +0.0 [+0.0, +0.0] p 1"
    )


def test_against_one_problem_records_null_not_nan():
    """A dataset of one problem has no interval: its `against` entry held NaN, which
    `json.dumps` wrote as `NaN`, and strict JSON readers (jq, JavaScript, `json.loads` with
    `parse_constant`) refuse the whole report. It is `null`, as `stderr` is."""
    from rlvr.cli.eval_against import paired

    problems = [
        {"dataset": d, "id": str(i), "reference": "1", "n": 2, "c": c}
        for d, i, c in [("a", 0, 2), ("a", 1, 0), ("b", 0, 2)]
    ]
    new = {"verifier": "math", "problems": problems}
    base = {"verifier": "math", "problems": [{**p, "c": 1} for p in problems]}
    section, _ = paired("base.json", new, base)
    json.dumps(section, allow_nan=False)  # raises on NaN
    assert section["per_dataset"]["b"]["avg@2"] == {
        "mean": 0.5, "low": None, "high": None, "p": None, "problems": 1
    }  # fmt: skip
    assert section["all"]["avg@2"]["low"] is not None


def test_against_the_output_file_itself_is_refused_before_it_is_written_over(
    tmp_path, capsys, monkeypatch
):
    """`--against X --output X` (one file, however spelt) sampled and then wrote the new
    report over the base one: the comparison was printed, the earlier report was lost. It is
    now one line before anything loads, and the file is left as it was."""
    import rlvr.models

    monkeypatch.setattr(rlvr.models, "load_model", _never)
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    problem = {"dataset": "qa", "id": "qa-0", "reference": "2", "n": 2, "c": 1}
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"verifier": "math", "problems": [problem]}))
    before = base.read_text()
    monkeypatch.chdir(tmp_path)
    argv = ["--model", "tiny", "--data", str(data), "--against", "base.json"]
    assert main([*argv, "--output", str(base)]) == 2
    assert capsys.readouterr().err == (
        "rlvr: error: --against base.json is the --output file: this evaluation would write "
        "over the report it compares with; give another --output\n"
    )
    assert base.read_text() == before
    (tmp_path / "linked.json").hardlink_to(base)  # the same file under another name
    assert main([*argv, "--output", "linked.json"]) == 2
    assert "is the --output file" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_timeout_that_is_no_time_limit_is_refused_by_its_flag(value, capsys):
    """`--timeout nan` passed every check, sampled every problem and then failed ("cannot
    convert float NaN to integer"); `--timeout 0` was refused as `timeout_s`. Both are now
    argparse's line naming --timeout, in rlvr eval and rlvr data filter."""
    with pytest.raises(SystemExit, match="2"):
        main(["--model", "tiny", "--data", "x.jsonl", "--timeout", value])
    assert capsys.readouterr().err.endswith(
        f"rlvr eval: error: argument --timeout: expected a number of seconds > 0, got '{value}'\n"
    )
    argv = ["data", "filter", "x.jsonl", "-o", "y.jsonl", "--model", "tiny", "--keep", "mean>0"]
    with pytest.raises(SystemExit, match="2"):
        rlvr_main([*argv, "--timeout", value])
    assert "argument --timeout: expected a number of seconds > 0" in capsys.readouterr().err


def test_a_checkpoint_takes_its_runs_lean_options_and_says_when_its_sampler_is_refused(
    tmp_path, capsys
):
    """A run with `rollout.sampler_options` for the lean sampler (`draw: multinomial`)
    evaluated with them, but `rlvr eval` on its checkpoint dropped them (other tokens). A run
    whose sampler options this rlvr refuses (an option since renamed, a sampler registered
    only in training) made rlvr eval drop all of the run's sampling settings without a word
    (n, T, max tokens: its own defaults); it is now one line naming the run's config.yaml, and
    --sampler samples otherwise with the run's other settings."""
    rollout = "{max_new_tokens: 64}"
    lean = RUN_EVAL.replace(rollout, "{max_new_tokens: 64, sampler_options: {draw: multinomial}}")
    checkpoint, data = _checkpoint_and_data(tmp_path, lean)
    base = ["--model", str(checkpoint), "--data", str(data)]
    assert _resolved(base) == ("lean", {"draw": "multinomial"})
    bad = RUN_EVAL.replace(rollout, "{max_new_tokens: 64, sampler: hf, sampler_options: {fast: 1}}")
    bad_checkpoint, _ = _checkpoint_and_data(tmp_path / "bad", bad)
    argv = ["--model", str(bad_checkpoint), "--data", str(data)]
    with pytest.raises(ValueError, match=r"^the run's rollout.sampler hf with sampler_options "):
        _resolved(argv)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown option(s) fast for sampler 'hf'" in err and err.endswith(
        "give --sampler (and --sampler-option) to sample otherwise\n"
    )
    assert _resolved([*argv, "--sampler", "hf"]) == ("hf", {})
    sampled = _sampling([*argv, "--sampler", "hf"])
    assert (sampled.n, sampled.sampling.max_new_tokens, sampled.seed) == (2, 64, 77)


def test_against_a_report_scored_with_other_extraction_is_refused(tmp_path, capsys, monkeypatch):
    """`--against` checked the verifier's name only: a report scored with `--extract flexible`
    (more answers count correct) was compared with a strict one as if the models differed.
    Options that decide correctness must now agree; `--correct` / `--wrong` (the scale of
    the scores, not which completions count) may differ."""
    import rlvr.models

    monkeypatch.setattr(rlvr.models, "load_model", _never)
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "answer": "2"}) + "\n")
    problem = {"dataset": "qa", "id": "qa-0", "reference": "2", "n": 2, "c": 1}
    base = tmp_path / "base.json"
    options = {"extract": "flexible", "wrong": -1.0}
    base.write_text(json.dumps({"verifier": "math", "verifier_options": options, "problems": [problem]}))  # fmt: skip
    argv = ["--model", "tiny", "--data", str(data), "--against", str(base)]
    argv += ["--output", str(tmp_path / "new.json")]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"rlvr: error: --against {base}: verifier options {{}} (new) and {options} (base) "
        "decide correctness otherwise: give its --extract to compare\n"
    )
    with pytest.raises(AssertionError, match="the model was loaded"):  # past the check
        main([*argv, "--extract", "flexible", "--correct", "2", "--debug"])


def test_a_dry_run_checks_the_against_report_on_local_data(tmp_path, capsys):
    """`--dry-run --against` read the report but left its problems unchecked; with local
    --data it now checks them as the run does, and says when it cannot (a run's set)."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n" for i in range(3)))  # fmt: skip
    problems = [
        {"dataset": "qa", "id": f"qa-{i}", "reference": str(i + 1), "n": 2, "c": 1}
        for i in range(3)
    ]
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"verifier": "math", "problems": problems}))
    argv = ["--model", "tiny", "--data", str(data), "--against", str(base), "--dry-run"]
    assert main(argv) == 0
    assert f"--against {base}: the same 3 problems\n" in capsys.readouterr().out
    assert main([*argv, "--limit", "2"]) == 2
    assert "the reports hold other problems (2 and 3, 2 in both)" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["99999999999999999999", "-1", "4294967296", "1.5"])
def test_a_seed_out_of_range_is_refused_by_its_flag_before_anything_loads(value, capsys):
    """`rlvr eval --seed 99999999999999999999` loaded the model and sampled until torch said
    `Overflow when unpacking long long`; rlvr data filter and rlvr data gen took it too."""
    said = "argument --seed: expected a whole number from 0 to 4294967295 (2**32 - 1), got "
    with pytest.raises(SystemExit, match="2"):
        main(["--model", "tiny", "--data", "x.jsonl", "--seed", value])
    assert said in capsys.readouterr().err.strip().splitlines()[-1]
    filter_argv = ["data", "filter", "x.jsonl", "-o", "y.jsonl", "--model", "tiny", "--keep", "m>0"]
    for argv in (filter_argv, ["data", "gen", "chain_sum", "--size", "2", "-o", "y.jsonl"]):
        with pytest.raises(SystemExit, match="2"):
            rlvr_main([*argv, "--seed", value])
        assert said in capsys.readouterr().err
