"""``rlvr compare`` on the command line: listing, dry run, report only, errors."""

import json
from pathlib import Path

import pytest
import yaml

from rlvr.cli import main as rlvr
from rlvr.compare import load_study, plan, run_study
from rlvr.compare.worker import FINAL_FILE


def test_list_shows_the_bundled_studies(capsys):
    assert rlvr(["compare", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("abc", "etr", "klear", "apmpo", "all"):
        assert f"\n{name} " in f"\n{out}"
    assert "19 arms x 3 seeds" in out


def test_unknown_study_is_one_line(capsys):
    assert rlvr(["compare", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: study 'nope' is neither a file nor a bundled study")
    assert "\n" not in err


def test_two_studies_in_one_command_is_one_line(capsys):
    """``rlvr compare abc etr`` read ``etr`` as a malformed override."""
    assert rlvr(["compare", "abc", "etr", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlvr: error: one study per command: run rlvr compare etr on its own"


def test_bad_jobs(capsys):
    assert rlvr(["compare", "abc", "--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [[], ["--dry-run"]])
def test_an_out_that_is_a_file_is_one_line(tmp_path, capsys, flag):
    """--dry-run listed runs to make under a file, which the run then could not create."""
    out = tmp_path / "afile"
    out.write_text("kept")
    assert rlvr(["compare", "abc", "--out", str(out), *flag]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"rlvr: error: --out {out}: {out} is a file, not a directory"
    )
    assert out.read_text() == "kept"


@pytest.mark.parametrize("flag", [[], ["--dry-run"], ["--report-only"]])
@pytest.mark.parametrize(
    ("option", "below", "said"),
    [
        ("--report-dir", "", ": {file} is a file, not a directory"),
        ("--report-dir", "report", ": {file} is a file, not a directory"),
        ("--out", "o", ": {file} is a file, not a directory"),
    ],
)
def test_a_report_dir_or_out_below_a_file_is_refused_before_any_run(
    tmp_path, capsys, flag, option, below, said
):
    """``--report-dir`` naming a file passed the dry run, and the study ran every run before
    the report stopped it with ``[Errno 17] File exists``; ``--out`` inside a file likewise."""
    file = tmp_path / "afile"
    file.write_text("kept")
    folder = file / below if below else file
    argv = ["compare", "abc", option, str(folder), *flag]
    if option == "--report-dir":
        argv += ["--out", str(tmp_path / "out")]
    assert rlvr(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlvr: error: {option} {folder}" + said.format(file=file)
    assert file.read_text() == "kept" and not (tmp_path / "out").exists()


def test_a_folder_that_is_not_writable_is_named(tmp_path, monkeypatch, capsys):
    """Checked with ``os.access`` (a root user may write anywhere, so it is made to say no)."""
    import os

    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path)
    assert rlvr(["compare", "abc", "--dry-run", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlvr: error: --out {tmp_path / 'o'}: {tmp_path} is not writable"


@pytest.mark.parametrize("flag", ["--dry-run", "--report-only"])
def test_an_out_that_is_a_runs_folder_is_one_line(small_study, tmp_path, capsys, flag):
    """``--out OUT/runs`` looked for the runs under OUT/runs/runs and planned every one again."""
    study = small_study()
    run_dir = plan(load_study(study), tmp_path / "o" / "runs")[0].run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "run.yaml").write_text("{}")
    runs = tmp_path / "o" / "runs"
    assert rlvr(["compare", study, "--out", str(runs), flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rlvr: error: --out {runs} holds run folders itself (")
    assert err.endswith(f"give the folder above it: --out {tmp_path / 'o'}") and "\n" not in err
    assert not (runs / "runs").exists()


@pytest.mark.parametrize("name", ["runs", "../elsewhere", "a/b"])
def test_a_study_name_that_is_no_plain_folder_name_is_one_line(small_study, tmp_path, capsys, name):
    """The report goes to OUT/NAME: `runs` wrote it among the runs, a path outside OUT."""
    assert rlvr(["compare", small_study(name=name), "--out", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"name {name!r} must be a plain folder name other than 'runs'" in err


def test_dry_run_lists_the_plan(small_study, tmp_path, capsys):
    assert rlvr(["compare", small_study(), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("run ") for line in lines)
    assert "grpo seed 0" in lines[0] and "abc seed 1" in lines[-1]


def _a_finished_run(study_file: str, out: Path) -> Path:
    """The first run of ``study_file`` under ``out``, marked finished (no training)."""
    run_dir = plan(load_study(study_file), out / "runs")[0].run_dir
    run_dir.mkdir(parents=True)
    (run_dir / FINAL_FILE).write_text("{}")
    return run_dir / FINAL_FILE


def test_fresh_with_report_only_is_one_line_and_deletes_nothing(small_study, tmp_path, capsys):
    """--fresh --report-only deleted every finished run, then reported on none."""
    study, out = small_study(), tmp_path / "o"
    final = _a_finished_run(study, out)
    assert rlvr(["compare", study, "--out", str(out), "--fresh", "--report-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "rlvr: error: --fresh deletes the study's runs and --report-only runs none: use one"
    )
    assert final.is_file() and not (out / "small").exists()
    with pytest.raises(ValueError, match="fresh=True deletes"):
        run_study(load_study(study), out, fresh=True, run=False)
    assert final.is_file()


@pytest.mark.parametrize("flag", [[], ["--dry-run"]])
def test_an_import_no_run_can_find_is_one_line_before_any_run(small_study, tmp_path, capsys, flag):
    """``imports: [no_such_module]`` started every run, and each failed on it at its start."""
    study, out = small_study(imports=["parity_verifier", "no_such_module"]), tmp_path / "o"
    assert rlvr(["compare", study, "--out", str(out), *flag]) == 2
    assert capsys.readouterr().err.strip() == (
        "rlvr: error: study 'small': imports no_such_module, which a run cannot import "
        "(not in the working folder or on PYTHONPATH)"
    )
    assert not (out / "runs").exists()


def test_report_only_needs_no_import_the_arms_can_be_read_without(small_study, tmp_path, capsys):
    """A study's report could not be written again once its ``imports`` module was gone
    ("imports myrl, which a run cannot import"), though nothing is run or read from it."""
    study, out = small_study(imports=["parity_verifier", "gone_module_x"]), tmp_path / "o"
    assert rlvr(["compare", study, "--out", str(out), "--report-only"]) == 0
    assert (out / "small" / "report.md").is_file()
    assert (out / "small" / "runs.csv").read_text().splitlines() == [
        "regime,arm,label,seed,code,minutes"  # no finished run: no row, no held-out key
    ]
    assert rlvr(["compare", study, "--out", str(out), "--dry-run"]) == 2  # a run needs it
    assert "imports gone_module_x, which a run cannot import" in capsys.readouterr().err
    arm = {"recipe": "abc/grpo", "name": "mine", "overrides": ["objective.name=mine_x"]}
    study = small_study(imports=["gone_module_x"], arms=[arm], claims=[])
    assert rlvr(["compare", study, "--out", str(out), "--report-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: study 'small', arm 'mine': objective: unknown objective")
    assert err.endswith("(imports gone_module_x: not in the working folder or on PYTHONPATH)")
    assert "\n" not in err


def test_a_module_gone_since_the_runs_is_said_to_be_gone(small_study, tmp_path):
    from rlvr.compare.run import stale_modules

    study, out = small_study(), tmp_path / "o"
    final = _a_finished_run(study, out)
    final.write_text(json.dumps({"modules": {"gone_module_x": "0123456789ab"}}))
    assert "(gone_module_x: no file now)" in stale_modules(plan(load_study(study), out / "runs"))


def test_a_failed_run_is_named_with_its_error(small_study, tmp_path, capsys):
    """A failed run was named with its log only: the error was one file away."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": \n')  # found by the checks before the runs, read by each run
    arm = {
        "recipe": str(tmp_path / "base.yaml"),
        "name": "grpo",
        "overrides": [f"data.train={bad}"],
    }
    study, out = small_study(arms=[arm], claims=[], seeds=[0, 1]), tmp_path / "o"
    assert rlvr(["compare", study, "--out", str(out), "--jobs", "1"]) == 1
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("failed: ")]
    log = out / "runs" / next(p.name for p in (out / "runs").iterdir()) / "seed0" / "worker.log"
    assert lines[0].startswith(f"failed: grpo seed 0: ValueError: {bad}:1: invalid JSON")
    assert lines[0].endswith(f"(log: {log})") and len(lines) == 2


@pytest.mark.parametrize("flag", [[], ["--dry-run"]])
def test_an_arm_whose_runs_would_stop_at_their_start_is_one_line_first(
    small_study, tmp_path, capsys, flag
):
    """``model.name=/no/model`` started every seed of the arm, and each failed at its start."""
    arm = {
        "recipe": str(tmp_path / "base.yaml"),
        "name": "grpo",
        "overrides": ["model.name=/no/model"],
    }
    study, out = small_study(arms=[arm], claims=[], seeds=[0, 1]), tmp_path / "o"
    assert rlvr(["compare", study, "--out", str(out), *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "rlvr: error: arm grpo: model.name: /no/model: no such directory"
    assert not (out / "runs").exists()


def test_a_dry_run_with_fresh_lists_finished_runs_as_run_again(small_study, tmp_path, capsys):
    """--fresh --dry-run listed a finished run as ``reuse``, though --fresh runs it again."""
    study, out = small_study(), tmp_path / "o"
    final = _a_finished_run(study, out)
    assert rlvr(["compare", study, "--out", str(out), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("reuse ")
    assert rlvr(["compare", study, "--out", str(out), "--fresh", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("run ") for line in lines)
    assert final.is_file()


def test_a_claim_metric_a_finished_run_did_not_log_is_one_line_before_more_runs(
    small_study, tmp_path, capsys
):
    """A misspelt claim metric (policy/entropy written policy/entrpy) was found by the
    report, after every run had finished; a finished run of its arm now finds it."""
    claims = yaml.safe_load((tmp_path / "claims.yaml").read_text())
    claims["claims"][0]["metric"] = "policy/entrpy"  # entropy: abc against grpo
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(claims))
    study, out = small_study(), tmp_path / "o"
    final = _a_finished_run(study, out)  # grpo seed 0
    rows = [{"step": 0}, {"step": 1, "update/skipped": 0.0, "policy/entropy": 1.0}]
    (final.parent / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rlvr(["compare", study, "--out", str(out), "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (
        "rlvr: error: study 'small': claim entropy reads policy/entrpy, which the finished run "
        "grpo seed 0 did not log (did you mean policy/entropy?); fix the claim and run again "
        "(finished runs are kept and reused)"
    )
    assert final.is_file()


@pytest.mark.slow
def test_report_only_runs_nothing(small_study, tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["compare", small_study(), "--out", str(out), "--report-only", "--keep-checkpoints"]
    with pytest.warns(UserWarning, match=r"no finished run of study 'small' under .*: the report"):
        assert rlvr(argv) == 0
    text = capsys.readouterr().out
    assert "inconclusive" in text and "report:" in text
    assert not (out / "runs").exists()
    report = (out / "small" / "report.md").read_text()
    assert "0 of 4 runs finished" in report and "no finished runs of" in report
    assert (
        "--report-only" not in report and "--keep-" not in report and f"--out {out}" in report
    )  # the command that reproduces it


def test_a_study_that_names_its_confirmatory_claims_reports_the_others_as_descriptive(
    small_study, tmp_path, capsys
):
    out = tmp_path / "o"
    assert (
        rlvr(["compare", small_study(), "confirms=[q4]", "--out", str(out), "--report-only"]) == 0
    )
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[:3]}
    assert "descriptive; " in lines["entropy"] and "descriptive" not in lines["q4"]
    report = (out / "small" / "report.md").read_text()
    assert "**1 confirmatory, 2 descriptive**" in report and "| question |" in report
    roles = [c["role"] for c in json.loads((out / "small" / "results.json").read_text())["claims"]]
    assert sorted(roles) == ["confirmatory", "descriptive", "descriptive"]


def test_a_study_whose_finished_runs_other_code_made_is_flagged_before_it_mixes(
    small_study, tmp_path, monkeypatch
):
    from rlvr.compare import plan
    from rlvr.compare.run import mixed_code
    from rlvr.compare.worker import code_hash

    out = tmp_path / "o"
    specs = plan(load_study(small_study()), out / "runs")
    specs[0].run_dir.mkdir(parents=True)
    (specs[0].run_dir / "metrics.jsonl").write_text("")
    (specs[0].run_dir / "final.json").write_text(json.dumps({"code": "0123456789ab"}))
    assert mixed_code(specs) == (
        "1 of the study's 1 finished runs were made by other rlvr code (1 by 0123456789ab) than "
        f"this copy ({code_hash()}), so the 3 runs made now would mix code: run from a "
        "checkout of the code that made them, or --fresh"
    )
    with pytest.warns(UserWarning, match="^1 of the study's 1 finished runs were made by other"):
        assert rlvr(["compare", small_study(), "--out", str(out), "--dry-run"]) == 0
    monkeypatch.setattr("rlvr.compare.run.execute", lambda *args: None)  # run nothing
    with pytest.warns(UserWarning, match="the 3 runs made now would mix code"):
        run_study(load_study(small_study()), out, live=False)
    (specs[0].run_dir / "final.json").write_text(json.dumps({"code": code_hash()}))
    assert mixed_code(specs) == ""
    (specs[0].run_dir / "final.json").write_text(json.dumps({"code": "0123456789ab"}))
    assert mixed_code(specs[:1]) == ""  # nothing left to make: the report says it


def test_overrides_on_the_command_line_change_the_plan(small_study, tmp_path, capsys):
    out = str(tmp_path / "o")
    assert rlvr(["compare", small_study(), "--dry-run", "seeds=[1]", "--out", out]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("seed 1 " in line for line in lines)
    assert rlvr(["compare", small_study(), "steps=x", "--dry-run"]) == 2
    assert "with steps=x" in capsys.readouterr().err


def test_a_reports_command_repeats_the_overrides(small_study, tmp_path):
    study = load_study(small_study(), ["seeds=[0]"])
    result = run_study(study, tmp_path / "o", run=False)
    assert "'seeds=[0]' --out" in result.report.markdown.read_text()  # quoted for a shell


def test_a_replication_study_reports_on_the_study_it_replicates(small_study, tmp_path):
    base = small_study()
    replica = tmp_path / "replica.yaml"
    replica.write_text(yaml.safe_dump({"include": [base], "seeds": [5], "replicates": base}))
    study = load_study(str(replica))
    assert study.replicates == base
    result = run_study(study, tmp_path / "o", run=False)
    text = result.report.markdown.read_text()
    assert f"## Replication of `{base}`" in text
    assert "has no decided verdict among its finished runs here" in text
    assert json.loads(result.report.results.read_text())["replication"]["of"] == base


def test_a_one_seed_study_with_claims_warns_before_any_run(small_study, tmp_path, recwarn):
    """A one-seed study ran every arm, then judged no claim (a paired interval needs two)."""
    args = ["compare", small_study(), "--out", str(tmp_path / "o"), "--dry-run"]
    assert rlvr(args) == 0
    assert not [w for w in recwarn if "no claim can be judged" in str(w.message)]
    assert rlvr([*args, "seeds=[0]"]) == 0
    said = [str(w.message) for w in recwarn if "no claim can be judged" in str(w.message)]
    assert said == [
        "study 'small' has 1 seed: no claim can be judged (a paired interval needs 2); "
        "give more, e.g. seeds=[0,1,2,3,4,5,6]"
    ]
    recwarn.clear()  # a regime of its own one seed (the study's other regime has two)
    assert rlvr([*args, "regimes={paper: {seeds: [0]}, more: {rollout: {epochs: 2}}}"]) == 0
    said = [str(w.message) for w in recwarn if "no claim can be judged" in str(w.message)]
    assert said == [
        "study 'small' regime 'paper' has 1 seed: no claim can be judged (a paired interval "
        "needs 2); give more, e.g. seeds=[0,1,2,3,4,5,6]"
    ]


def test_finished_runs_made_with_other_code_of_your_module_are_flagged(small_study, tmp_path):
    """Editing your module (in `imports`, or named as `objective.name=my_module.mine`) reused
    its finished runs without a word: `rlvr compare` and `--dry-run` now warn."""
    from rlvr.compare import plan
    from rlvr.compare.run import stale_modules
    from rlvr.compare.worker import code_hash, module_hashes, own_modules
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import load_config

    out = tmp_path / "o"
    specs = plan(load_study(small_study()), out / "runs")
    assert own_modules(specs[0].config, ("parity_verifier",)) == ("parity_verifier",)
    cfg = load_config(TrainConfig, "demo", ["reward.verifier=checks.exact:answer+format"])
    assert own_modules(cfg, ("a",)) == ("a", "checks")
    now = module_hashes(["parity_verifier"])
    assert len(now["parity_verifier"]) == 12 and module_hashes(["not_here"]) == {"not_here": ""}
    specs[0].run_dir.mkdir(parents=True)
    final = {"code": code_hash(), "modules": now}
    (specs[0].run_dir / "final.json").write_text(json.dumps(final))
    assert stale_modules(specs) == ""
    final["modules"] = {"parity_verifier": "0123456789ab"}
    (specs[0].run_dir / "final.json").write_text(json.dumps(final))
    assert stale_modules(specs) == (
        "1 of the study's 1 finished runs were made by other code of parity_verifier than its "
        "file now; they are reused as they are (--fresh runs them again)"
    )
    with pytest.warns(UserWarning, match="^1 of the study's 1 .* other code of parity_verifier"):
        assert rlvr(["compare", small_study(), "--out", str(out), "--dry-run"]) == 0


def test_a_misspelt_verifier_of_a_study_with_imports_is_one_line_before_any_run(
    small_study, tmp_path, capsys
):
    """A study with `imports` left its verifiers to the runs: `reward.verifier=parity_tst`
    passed --dry-run and every seed of the arm failed at its start."""
    base = str(tmp_path / "base.yaml")
    arms = [
        {"recipe": base, "name": "grpo"},
        {"recipe": base, "name": "typo", "overrides": ["reward.verifier=parity_tst"]},
    ]
    out = tmp_path / "o"
    assert rlvr(["compare", small_study(arms=arms), "--out", str(out), "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith(
        "rlvr: error: arm typo: reward.verifier: unknown verifier 'parity_tst'; valid: "
    )
    assert not (out / "runs").exists()


def test_the_printed_verdicts_name_their_regime(tmp_path, monkeypatch, capsys):
    """A study with regimes printed each claim once per regime with nothing to tell the lines
    apart ("inconclusive  abc-avg ..." twice)."""
    from types import SimpleNamespace

    def verdict(regime: str) -> SimpleNamespace:
        claim = SimpleNamespace(id="abc-avg")
        return SimpleNamespace(
            status="inconclusive", claim=claim, regime=regime, role="", p_holm=None, numbers="n"
        )

    report = SimpleNamespace(
        verdicts=[verdict("paper"), verdict("off-policy")], markdown="m", html="h", runs="r"
    )
    fake = SimpleNamespace(report=report, failed=[])
    monkeypatch.setattr("rlvr.compare.run_study", lambda *args, **kwargs: fake)
    regimes = "regimes={paper: {}, off-policy: {rollout: {minibatches: 16}}}"
    assert rlvr(["compare", "abc", regimes, "--out", str(tmp_path), "--report-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[:2]] == [
        ["inconclusive", "abc-avg"],
        ["inconclusive", "abc-avg"],
    ]
    assert "[paper]" in lines[0] and "[off-policy]" in lines[1]
    assert rlvr(["compare", "abc", "--out", str(tmp_path), "--report-only"]) == 0
    assert "[" not in capsys.readouterr().out.splitlines()[0]  # one regime: none named
