"""rlvr compare end to end on the tiny random model: runs, reuse, resume, report sections."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlvr.compare import load_study, plan, run_study
from rlvr.compare.render import to_markdown
from rlvr.compare.report import build_blocks
from rlvr.compare.results import ArmData, RunData
from rlvr.compare.run import metric_check
from rlvr.compare.runner import (
    RunState,
    _reap,
    _stop,
    default_jobs,
    initial_states,
    worker_env,
)
from rlvr.compare.worker import FINAL_FILE, RUN_FILE, code_hash, module_hashes
from rlvr.train.interrupt import Stopped
from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import dump_yaml

SECTIONS = [
    "# Study `small`",
    "## Verdicts",
    "### Claims",
    "### Final held-out scores",
    "## How the numbers are made",
    "## Runs",
]


def _row(run_dir: Path, step: int) -> dict:
    return next(r for r in read_metrics(run_dir / "metrics.jsonl") if r["step"] == step)


@pytest.mark.slow
def test_small_study_runs_reuses_and_reports(small_study, tmp_path):
    study = load_study(small_study())
    out = tmp_path / "out"
    result = run_study(study, out, jobs=2, live=False)
    assert [s.status for s in result.states] == ["finished"] * 4, [
        s.log.read_text()[-2000:] for s in result.states
    ]
    for state in result.states:
        final = json.loads((state.spec.run_dir / FINAL_FILE).read_text())
        assert final["step"] == 2 and len(final["final_eval"]["problems"]) == 8
        assert final["code"] == code_hash()
        assert final["modules"] == module_hashes(["parity_verifier"])  # the study's imports
        rows = read_metrics(state.spec.run_dir / "metrics.jsonl")
        assert [r["step"] for r in rows] == [0, 1, 2]
        assert not (state.spec.run_dir / "checkpoints").exists()  # checkpoint.every=1 wrote some
    report = result.report
    text = report.markdown.read_text()
    for section in SECTIONS:
        assert section in text, section
    assert "GRPO (`grpo`)" in text and "vs `grpo`" in text  # final table with the paired CI
    assert {v.claim.id for v in report.verdicts} == {"entropy", "q4", "avg"}
    assert all(
        v.status in ("reproduced", "not reproduced", "inconclusive") for v in report.verdicts
    )
    page = report.html.read_text()
    assert page.count("data:image/png;base64,") == len(report.figures) >= 2
    assert "<table>" in page and "src='figures/" not in page  # self-contained
    for fig in report.figures:
        assert fig.stat().st_size > 1000 and f"figures/{fig.name}" in text
    results = json.loads(report.results.read_text())
    assert results["arms"]["abc"]["seeds"] == [0, 1]
    tested = [c for c in results["claims"] if c["intervals"] and c["verdict"] != "untestable"]
    assert tested and all(0 <= c["p"] <= c["p_holm"] <= 1 for c in tested)
    assert "Holm p" in text and "BH q" in text

    # a second run reuses every finished run: nothing is started, the metrics are untouched
    before = {s.spec.run_dir: (s.spec.run_dir / "metrics.jsonl").read_text() for s in result.states}
    stale = report.figures[0].with_name("renamed-group-curves.png")  # an earlier report's
    stale.write_bytes(report.figures[0].read_bytes())
    again = run_study(study, out, jobs=2, live=False)
    assert [s.status for s in again.states] == ["done"] * 4
    assert not stale.exists() and all(f.exists() for f in again.report.figures)
    assert {
        s.spec.run_dir: (s.spec.run_dir / "metrics.jsonl").read_text() for s in again.states
    } == before

    # a changed setting is a different run (a new directory), the old ones stay
    changed = load_study(small_study(settings={"threads": 1, "optim": {"lr": 2e-3}}))
    assert {s.run_dir for s in plan(changed, out / "runs")}.isdisjoint(before)


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint(small_study, tmp_path):
    study = load_study(small_study(steps=3, seeds=[0]))
    out = tmp_path / "out"
    spec = plan(study, out / "runs")[0]
    spec.run_dir.mkdir(parents=True)
    (spec.run_dir / RUN_FILE).write_text(dump_yaml(spec.config))
    victim = subprocess.Popen(
        [sys.executable, "-m", "rlvr.compare.worker", str(spec.run_dir), *study.imports],
        env=worker_env(),
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        if (spec.run_dir / "checkpoints" / "step_000001").exists():
            victim.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    assert victim.wait(timeout=60) == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (spec.run_dir / FINAL_FILE).exists()
    first = _row(spec.run_dir, 1)

    states = initial_states([spec])
    assert states[0].status == "queued" and states[0].resumed
    result = run_study(study, out, jobs=1, live=False)
    state = next(s for s in result.states if s.spec.arm.name == "grpo")
    assert state.status == "finished", state.log.read_text()[-2000:]
    assert _row(spec.run_dir, 1) == first  # step 1 was not run again
    assert [r["step"] for r in read_metrics(spec.run_dir / "metrics.jsonl")] == [0, 1, 2, 3]
    assert "resume" in state.log.read_text()


def test_fresh_deletes_nothing_while_a_run_of_the_study_is_being_written(small_study, tmp_path):
    """A second ``rlvr compare --fresh`` on the same ``--out`` deleted the run directories the
    first was writing in; now it refuses before deleting any."""
    from rlvr.locks import holding
    from rlvr.train.run_dir import LOCK_FILE

    study = load_study(small_study(steps=3, seeds=[0, 1]))
    first, second = plan(study, tmp_path / "out" / "runs")[:2]
    first.run_dir.mkdir(parents=True)
    with holding(second.run_dir / LOCK_FILE, "busy"):
        with pytest.raises(ValueError, match=r"^--fresh: .* being written by another run"):
            initial_states([first, second], fresh=True)
        assert first.run_dir.is_dir() and second.run_dir.is_dir()
    initial_states([first, second], fresh=True)
    assert not first.run_dir.exists() and not second.run_dir.exists()


def _ended(pid: int) -> bool:
    """The process ``pid`` is gone or a zombie (an orphan's new parent may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_stops_when_its_runner_is_killed(small_study, tmp_path):
    """A runner killed with SIGKILL left its worker running, writing the run directory that the
    next ``rlvr compare`` resumed in a second worker."""
    study = small_study(steps=3, seeds=[0])
    runner = (
        "from pathlib import Path\n"
        "from rlvr.compare import load_study, plan\n"
        "from rlvr.compare.runner import RunState, launch\n"
        f"study = load_study({study!r})\n"
        f"state = RunState(plan(study, Path({str(tmp_path / 'runs')!r}))[0])\n"
        "launch(state, study.imports)\n"
        "print(state.process.pid, flush=True)\n"
    )
    made = subprocess.run(
        [sys.executable, "-c", runner], env=worker_env(), capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr[-2000:]
    worker = int(made.stdout.split()[-1])  # the runner has exited: the worker is an orphan
    deadline = time.monotonic() + 120
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ended(worker)
    spec = plan(load_study(study), tmp_path / "runs")[0]
    assert not (spec.run_dir / FINAL_FILE).exists()  # it stopped, it did not finish the run


LONG_RUN = {"threads": 1, "checkpoint": {"every": 100, "keep_last": 1}}
"""Study settings whose runs checkpoint only when stopped (40 steps: stopped long before)."""


def _start_study(study: str, out: Path, command: list[str] | None = None) -> subprocess.Popen:
    """``run_study`` of ``study`` in a process of its own (``command``: another, the CLI)."""
    command = command or [
        sys.executable, "-c", "from rlvr.compare import load_study, run_study\n"
        f"run_study(load_study({study!r}), {str(out)!r}, jobs=1, live=False)",
    ]  # fmt: skip
    return subprocess.Popen(command, env=worker_env(), stderr=subprocess.PIPE, text=True)


def _once_two_steps_logged(runner: subprocess.Popen, run_dir: Path, stop) -> str:
    """Call ``stop()`` once ``run_dir`` logged two steps (rows 0 and 1); the runner's stderr."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and runner.poll() is None:
        if (run_dir / "metrics.jsonl").exists() and _steps_logged(run_dir) >= 2:
            stop()
            break
        time.sleep(0.05)
    return runner.communicate(timeout=300)[1]


def _checkpointed_last_step(run_dir: Path) -> bool:
    """The run's last checkpoint is of its last logged step (rows 0 .. that step)."""
    saved = sorted((run_dir / "checkpoints").glob("step_*"))
    return bool(saved) and saved[-1].name == f"step_{_steps_logged(run_dir) - 1:06d}"


@pytest.mark.slow
def test_ctrl_c_stops_each_run_after_its_step_with_a_checkpoint(small_study, tmp_path):
    """Ctrl-C terminated the workers at once, though each had logged that it would stop after
    the step in flight with a checkpoint: a run checkpointing less often started over."""
    study, out = small_study(steps=40, seeds=[0], settings=LONG_RUN), tmp_path / "out"
    runner = _start_study(study, out)
    run_dir = plan(load_study(study), out / "runs")[0].run_dir
    err = _once_two_steps_logged(runner, run_dir, lambda: runner.send_signal(signal.SIGINT))
    assert "each running run stops after its step in flight" in err, err[-2000:]
    log = (run_dir / "worker.log").read_text()
    assert _checkpointed_last_step(run_dir), log[-2000:]
    assert not (run_dir / FINAL_FILE).exists()
    assert "Traceback" not in log and "the same `rlvr compare` command resumes" in log, log


@pytest.mark.slow
def test_sigterm_stops_the_study_as_ctrl_c_does_and_says_how_to_continue(small_study, tmp_path):
    """A scheduler's SIGTERM killed `rlvr compare` without a word (its workers, orphaned,
    stopped themselves); it is met as Ctrl-C: each run stops after its step in flight with a
    checkpoint, the command says so and how to continue, and exits 143."""
    study, out = small_study(steps=40, seeds=[0], settings=LONG_RUN), tmp_path / "out"
    command = [sys.executable, "-m", "rlvr", "compare", study, "--out", str(out), "--jobs", "1"]
    runner = _start_study(study, out, command)
    run_dir = plan(load_study(study), out / "runs")[0].run_dir
    err = _once_two_steps_logged(runner, run_dir, lambda: runner.send_signal(signal.SIGTERM))
    assert runner.returncode == 143, err[-2000:]
    assert "SIGTERM: each running run stops after its step in flight" in err, err[-2000:]
    assert f"to continue: rlvr compare {study} --out {out} --jobs 1" in err
    assert _checkpointed_last_step(run_dir)


def _worker_pids(run_dir: Path) -> list[int]:
    """The processes running ``python -m rlvr.compare.worker run_dir``."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"rlvr.compare.worker" in argv and str(run_dir).encode() in argv:
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("worker_first", [True, False])
def test_a_scheduler_signalling_every_process_still_gets_the_step_in_flight_checkpoint(
    small_study, tmp_path, worker_first
):
    """Slurm's scancel sends SIGTERM to every process of a job: the worker got it and the
    runner's forwarded stop, a second signal, so it stopped at once without a checkpoint.
    The runner's stop is now idempotent: a run already stopping goes on to its checkpoint."""
    study, out = small_study(steps=40, seeds=[0], settings=LONG_RUN), tmp_path / "out"
    runner = _start_study(study, out)
    run_dir = plan(load_study(study), out / "runs")[0].run_dir

    def scancel() -> None:
        pids = _worker_pids(run_dir)
        pids = [*pids, runner.pid] if worker_first else [runner.pid, *pids]
        for pid in pids:
            os.kill(pid, signal.SIGTERM)

    err = _once_two_steps_logged(runner, run_dir, scancel)
    assert _checkpointed_last_step(run_dir), (run_dir / "worker.log").read_text()[-2000:]
    assert "SIGTERM: each running run stops after its step in flight" in err, err[-2000:]


@pytest.mark.parametrize(
    ("stop", "code"), [(KeyboardInterrupt(), 130), (Stopped(signal.SIGTERM), 143)]
)
def test_a_stopped_worker_exits_with_its_signal(monkeypatch, tmp_path, capsys, stop, code):
    """A worker stopped by SIGTERM (its runner gone) exited 130, as after Ctrl-C."""
    from rlvr.compare import worker

    def stopped(*_):
        raise stop

    monkeypatch.setattr(worker, "run", stopped)
    assert worker.main([str(tmp_path)]) == code
    assert "the same `rlvr compare` command resumes" in capsys.readouterr().err


def _steps_logged(run_dir: Path) -> int:
    return len(read_metrics(run_dir / "metrics.jsonl"))


def test_the_report_flags_runs_made_by_other_code(small_study, tmp_path):
    """A finished run is reused whatever the code does now; the report said nothing of it."""
    study = load_study(small_study())
    specs = plan(study, tmp_path / "runs")

    def report(codes):
        data = {a.name: ArmData(a.name) for a in study.arms}
        for spec, code in zip(specs, codes, strict=True):
            final = {"code": code} if code else {}
            data[spec.arm.name].runs[spec.seed] = RunData(spec.seed, [], final)
        blocks = build_blocks(study, specs, {"default": data}, [], {}, "rlvr compare")
        return to_markdown(blocks, tmp_path)

    now = code_hash()
    assert "other rlvr code" not in report([now] * 4)
    text = report([now, "0123456789ab", now, None])  # None: a run from before the record
    assert (
        f"**2 of 4 finished runs were made by other rlvr code** than this report's (`{now}`" in text
    )
    assert "| `grpo` | default | 1 |" in text and "| yes | 0 s | `0123456789ab` |" in text
    assert "| yes | 0 s | `unknown` |" in text


def _held_out(name: str, correct_per_seed: list[list[int]]) -> ArmData:
    """An arm whose final evaluation at each seed got ``c`` of 4 right on each problem."""
    data = ArmData(name)
    for seed, cs in enumerate(correct_per_seed):
        problems = [{"id": str(i), "n": 4, "c": c, "diversity": {}} for i, c in enumerate(cs)]
        rows = [{"step": 2, "eval/avg@4": sum(cs) / (4 * len(cs)), "eval/pass@4": 1.0}]
        data.runs[seed] = RunData(seed, rows, {"final_eval": {"problems": problems}})
    return data


def test_results_json_has_each_arms_interval_against_its_baseline(small_study):
    """results.json, 'every number of the report', had no final-score interval of an arm
    against its baseline: the table's last columns could not be read back."""
    from rlvr.compare.report import _results_json

    study = load_study(small_study())
    data = {"grpo": _held_out("grpo", [[2, 1], [2, 1]]), "abc": _held_out("abc", [[4, 1], [2, 2]])}
    arms = _results_json(study, {"default": data}, [], [])["arms"]
    assert "vs_baseline" not in arms["grpo"]
    delta = arms["abc"]["vs_baseline"]["eval/avg@4"]
    # per-problem differences: seed 0 [+0.5, 0], seed 1 [0, +0.25]; seed means 0.25 and 0.125,
    # problem means 0.25 and 0.125: se^2 = 0.0078125 / 2 + 0.0078125 / 2, df = 2, t = 4.3027
    assert delta["mean"] == pytest.approx(0.1875) and delta["df"] == pytest.approx(2.0)
    assert delta["se"] == pytest.approx(0.0883883, abs=1e-7)
    assert (delta["low"], delta["high"]) == pytest.approx((-0.192804, 0.567804), abs=1e-6)
    assert arms["abc"]["vs_baseline"]["eval/pass@4"]["mean"] == 0.0  # every problem passed


def test_runs_csv_has_one_row_per_finished_run(small_study, tmp_path):
    """Per-seed final scores for a table of one's own (pandas, R, a paper) without parsing the
    nested results.json."""
    import csv

    from rlvr.compare.report import runs_table

    study = load_study(small_study())
    data = {"grpo": _held_out("grpo", [[2, 1], [2, 1]]), "abc": _held_out("abc", [[4, 1]])}
    data["abc"].runs[0].rows[0]["time/step"] = 90.0
    rows = runs_table(study, {"default": data})
    assert rows[0] == [
        "regime",
        "arm",
        "label",
        "seed",
        "code",
        "minutes",
        "eval/avg@4",
        "eval/pass@4",
    ]
    assert [r[1:4:2] for r in rows[1:]] == [["grpo", 0], ["grpo", 1], ["abc", 0]]
    assert rows[1][4:] == ["unknown", 0.0, 0.375, 1.0] and rows[3][5:7] == [1.5, 0.625]
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    read = list(csv.DictReader(path.open()))
    assert read[2]["arm"] == "abc" and float(read[2]["eval/avg@4"]) == 0.625


@pytest.mark.parametrize(
    ("code", "final", "keep", "status", "kept"),
    [
        (0, True, False, "finished", False),
        (0, True, True, "finished", True),
        (0, False, False, "failed", True),  # no final.json: the checkpoint is what resumes it
        (1, True, False, "failed", True),
    ],
)
def test_a_finished_runs_checkpoints_go_unless_kept(
    small_study, tmp_path, code, final, keep, status, kept
):
    spec = plan(load_study(small_study(seeds=[0])), tmp_path / "runs")[0]
    step = spec.run_dir / "checkpoints" / "step_000002"
    step.mkdir(parents=True)
    (step / "trainer_state.pt").write_bytes(b"state")
    if final:
        (spec.run_dir / FINAL_FILE).write_text("{}")
    state = RunState(spec, status="running", started=time.monotonic())
    state.process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    state.process.wait()
    assert _reap(state, keep_checkpoints=keep)
    assert state.status == status
    assert step.exists() == kept
    assert (spec.run_dir / FINAL_FILE).exists() == final


FINISH_ON_STOP = """
import json, signal, sys, time
def stop(*_):  # the step in flight was the last: the run finishes
    open(sys.argv[1], "w").write("{}")
    sys.exit(0)
signal.signal(signal.SIGUSR1, stop)  # the runner's first stop, as a worker meets it
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("keep", [False, True])
def test_a_run_that_finishes_while_ctrl_c_stops_the_study_loses_its_checkpoints(
    small_study, tmp_path, keep
):
    """Ctrl-C in a run's last step: it wrote final.json, but the runner marked it failed and
    kept its checkpoints (1.6 GB each on SmolLM2), which no later command deleted."""
    spec = plan(load_study(small_study(seeds=[0])), tmp_path / "runs")[0]
    step = spec.run_dir / "checkpoints" / "step_000002"
    step.mkdir(parents=True)
    state = RunState(spec, status="running", started=time.monotonic())
    final = str(spec.run_dir / FINAL_FILE)
    state.process = subprocess.Popen(
        [sys.executable, "-c", FINISH_ON_STOP, final], stdout=subprocess.PIPE, text=True
    )
    assert state.process.stdout.readline() == "ready\n"
    _stop([state], keep_checkpoints=keep)
    assert state.status == "finished" and state.process is None
    assert step.exists() == keep


def test_default_jobs_from_cores_and_threads():
    assert default_jobs(1, cores=2) == 2
    assert default_jobs(2, cores=2) == 1
    assert default_jobs(4, cores=2) == 1
    assert default_jobs(None, cores=16) == 16
    assert default_jobs(1) >= 1 and os.cpu_count() is not None


@pytest.mark.parametrize(
    ("base", "why"),
    [
        (
            {"threads": 1, "eval": {"n": 1, "ks": [1]}},
            r"evaluates eval.ks=\[1\] \(eval.n=1\), not eval/avg@2",
        ),
        (
            {"threads": 1, "data": {"eval": None}},
            r"has no held-out data \(data.eval\) for eval/avg@2",
        ),
        (  # the "final" held-out score was the evaluation before training
            {"threads": 1, "eval": {"every": 3, "at_end": False}},
            r"evaluates only before training \(eval.every=3, steps=2, eval.at_end=false\): "
            "eval/avg@2 would score the untrained model",
        ),
    ],
)
def test_a_claim_on_a_metric_the_runs_cannot_log_is_refused_before_running(
    small_study, tmp_path, base, why
):
    """With eval.n=2 and a pass@4 claim the report printed 'nan, nan; difference ...'."""
    study = load_study(small_study(settings=base))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=rf"claim avg cannot be judged: abc {why}"):
        run_study(study, out, jobs=1, live=False)
    assert not (out / "runs").exists()  # nothing ran


def test_a_claim_on_an_arm_not_in_the_study_is_named_not_dropped_silently():
    """A claim whose arm was misspelt vanished from the report with no word about it."""
    from rlvr.compare.report import _header, claims_left_out
    from rlvr.compare.run import check_claims

    assert claims_left_out(load_study("abc")) == ""
    study = load_study("evidence-smollm2-klear")
    line = claims_left_out(study)
    assert line.startswith("2 claims not judged") and "`klear-cispo-avg` (klear/cispo)" in line
    typo = load_study("abc", ["arms=[abc/grpo, {recipe: abc/abc_grpo, name: abc-abc_grpo}]"])
    assert claims_left_out(typo).startswith(
        "3 claims not judged, their arms not in the study: `abc-entropy` (abc/abc_grpo: did you "
        "mean abc-abc_grpo?);"
    )
    with pytest.warns(UserWarning, match="klear-gppo-cispo"):
        check_claims(study, plan(study, Path("unused")))
    assert line in [b.content for b in _header(study, [], {}, [], "rlvr compare")]


def test_the_final_tables_interval_names_its_seeds_when_fewer_than_an_arms():
    """Each arm's mean ± std uses its own seeds, the Δ interval only the seeds both arms ran,
    and the table did not say so: an arm with 3 seeds beside a baseline with 2 read as 3."""
    from types import SimpleNamespace

    from rlvr.compare.report import _delta

    arm = SimpleNamespace(name="abc", baseline="grpo")
    grpo = _held_out("grpo", [[2, 1], [2, 1]])
    both = {"grpo": grpo, "abc": _held_out("abc", [[4, 1], [2, 2]])}
    assert _delta(arm, both, "eval/avg@4").endswith("vs `grpo`")
    more = {"grpo": grpo, "abc": _held_out("abc", [[4, 1], [2, 2], [3, 3]])}
    assert _delta(arm, more, "eval/avg@4").endswith("vs `grpo` (the 2 seeds both ran)")


def _logging(arm: ArmData, **logged) -> ArmData:
    """``arm`` with ``logged`` added to every training row of its runs."""
    for run in arm.runs.values():
        run.rows = [{**row, **logged} for row in run.rows]
    return arm


def test_the_final_table_says_when_an_arm_trained_as_its_baseline_did(small_study, tmp_path):
    """An arm whose runs were bit-identical to its baseline's showed `+0.000 [+0.000, +0.000]`,
    which read as a measured zero effect with a tight interval. The claims' own test of
    whether two arms could differ decides it, not the differences being 0: two arms that
    trained differently and scored alike on every problem keep their numbers."""
    from rlvr.compare.study import objective_name

    grpo = {"recipe": str(tmp_path / "base.yaml"), "name": "grpo"}
    wider = {**grpo, "name": "abc", "baseline": "grpo", "overrides": ["objective.eps_high=0.03"]}
    study = load_study(small_study(arms=[grpo, wider]))  # they differ only in the objective
    specs = plan(study, tmp_path / "runs")
    grpo_name = objective_name(next(s.config for s in specs if s.arm.name == "grpo"))

    def cells(abc: ArmData) -> list[str]:
        data = {"grpo": _logging(_held_out("grpo", [[2, 1], [2, 1]]), **{"clip/q1_frac": 0.1})}
        blocks = build_blocks(study, specs, {"default": data | {"abc": abc}}, [], {}, "rlvr")
        row = next(line for line in to_markdown(blocks, tmp_path).splitlines() if "`abc`" in line)
        return row.strip(" |").split(" | ")[-2:]  # the avg@4 and pass@4 differences

    def abc(*correct, **logged):
        return _logging(_held_out("abc", list(correct)), **{"clip/q1_frac": 0.1, **logged})

    identical = ["untestable: identical runs vs `grpo`"] * 2
    assert cells(abc([2, 1], [2, 1])) == identical
    contrast = {f"contrast/{grpo_name}/token_frac": 0.0, f"contrast/{grpo_name}/rel_l2": 0.0}
    same_updates = abc([2, 1], [2, 1], **{"clip/q1_frac": 0.3}, **contrast)  # another band edge
    assert cells(same_updates) == ["untestable: identical updates vs `grpo`"] * 2
    # trained differently (entropy), scored alike everywhere: a zero difference, measured, with
    # no spread to make an interval of (it read `+0.000 [+0.000, +0.000]`, a tight interval)
    assert cells(abc([2, 1], [2, 1], **{"policy/entropy": 0.5})) == (
        ["+0.000 (no spread across seeds or problems: no interval) vs `grpo`"] * 2
    )
    # a zero mean with a spread keeps its interval: by problem +0.25 and -0.25 at seed 0, 0 and
    # 0 at seed 1; problem means +-0.125, se 0.125 on df 1, t = 12.706: half-width 1.588
    avg, _ = cells(abc([3, 0], [2, 1]))
    assert avg == "+0.000 [-1.588, +1.588] vs `grpo`"
    # identical training with a differing evaluation (not seen yet) shows the numbers
    drifted = abc([2, 1], [2, 1], **{"clip/q1_frac": 0.3}, **contrast)
    drifted.runs[1].final["final_eval"]["problems"][0]["c"] = 3
    assert not cells(drifted)[0].startswith("untestable")


def _claims_file(tmp_path: Path, *claims: dict) -> str:
    path = tmp_path / "metric-claims.yaml"
    base = {"source": "here", "text": "a claim"}
    path.write_text(yaml.safe_dump({"paper": "test", "claims": [base | c for c in claims]}))
    return str(path)


TYPO = {
    "id": "typo",
    "rule": "direction",
    "metric": "policy/entrpy",
    "arm": "abc",
    "baseline": "grpo",
}


def _finish(spec, rows: list[dict]) -> None:
    """A finished run of ``spec`` that logged ``rows`` (step 0 first)."""
    spec.run_dir.mkdir(parents=True)
    (spec.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (spec.run_dir / FINAL_FILE).write_text("{}")


def test_a_claim_metric_is_checked_on_the_first_finished_run_of_each_arm_it_reads(
    small_study, tmp_path
):
    """A misspelt claim metric was found by the report, after every run had finished."""
    kl_only = {"id": "kl", "rule": "largest", "arm": "abc", "metrics": ["kl/ref_k3", "kl/ref_k1"]}
    kl_only["expect"] = "kl/ref_k3"
    study = load_study(small_study(claims=[_claims_file(tmp_path, kl_only, TYPO)]))
    grpo0, abc0, grpo1, abc1 = plan(study, tmp_path / "runs")
    check = metric_check(study)
    updated = {"step": 1, "update/skipped": 0.0, "policy/entropy": 1.0}
    _finish(grpo0, [{"step": 0}, {"step": 1, "update/skipped": 1.0}])  # no update: decides nothing
    check(grpo0)
    _finish(grpo1, [{"step": 0}, {**updated, "kl/ref_k3": 0.1}])  # grpo reads no kl metric
    with pytest.raises(ValueError, match="claim typo reads policy/entrpy") as err:
        check(grpo1)
    assert "run grpo seed 1 did not log (did you mean policy/entropy?)" in str(err.value)
    assert "\n" not in str(err.value)
    _finish(abc0, [{"step": 0}, {**updated, "policy/entrpy": 0.0, "kl/ref_k3": 0.1}])
    with pytest.raises(ValueError, match="claim kl reads kl/ref_k1, .* abc seed 0 did not log"):
        check(abc0)
    check(abc0)  # each arm's first finished run decides: once
    check(abc1)  # not finished


@pytest.mark.slow
def test_a_misspelt_claim_metric_stops_the_study_after_the_first_run(small_study, tmp_path):
    """The misspelt name was found by the report, after every run had finished."""
    study = load_study(small_study(claims=[_claims_file(tmp_path, TYPO)]))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"claim typo reads policy/entrpy, .*grpo seed 0"):
        run_study(study, out, jobs=1, live=False)
    finished = sorted(p.parent.parent.name.split("-")[0] for p in out.glob("runs/*/*/final.json"))
    assert finished == ["grpo"]  # kept; the three other runs never started
    assert len(list(out.glob("runs/*/*"))) == 1
    with pytest.raises(ValueError, match="claim typo reads policy/entrpy"):  # at once, on start
        run_study(study, out, jobs=1, live=False)
    assert len(list(out.glob("runs/*/*"))) == 1


@pytest.mark.parametrize(("text", "why"), [("{", "Expecting property name"), ("[1]", "not a JSON")])
def test_a_damaged_final_json_is_named_with_the_run_to_delete(tmp_path, text, why):
    """``rlvr compare --report-only`` (or a rerun) over an edited ``final.json`` said only
    ``Expecting property name enclosed in double quotes: line 2 column 1 (char 2)``."""
    from rlvr.compare.results import load_run
    from rlvr.compare.worker import FINAL_FILE

    (tmp_path / FINAL_FILE).write_text(text)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(ValueError) as err:
        load_run(tmp_path, 0)
    assert str(err.value).startswith(f"{tmp_path / FINAL_FILE}: damaged ({why}")
    assert str(err.value).endswith(f"; delete {tmp_path} to run that run again")
