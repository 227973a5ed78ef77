"""Every user error is one line `rlvr: error: ...`, exit status 2, found before anything loads."""

import json

import pytest
import torch

from rlvr.cli import main as rlvr


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("rlvr: error: "), err
    return err[0]


def test_missing_training_file_fails_before_the_preset_is_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    missing = tmp_path / "missing.jsonl"
    assert rlvr(["train", f"data.train={missing}"]) == 2
    assert (
        _one_error_line(capsys) == f"rlvr: error: data.train: {missing}: no such file or directory"
    )
    assert not (tmp_path / "cache").exists()  # nothing was built or generated


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model=./no/such/model"], "model.name: ./no/such/model: no such directory"),
        (["reward.verifier=nope"], "reward.verifier: unknown verifier 'nope'"),
        (["rollout.group_size=x"], "rollout.group_size must be int, got 'x'"),
        (["objective.eps9=1"], "objective: unknown hyperparameter(s) eps9"),
        (["model.device=nope"], "model.device: device must be auto or a torch device such as cpu"),
    ],
)
def test_bad_values_are_one_line(overrides, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    assert rlvr(["train", *overrides]) == 2
    assert message in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--config", "demo.yaml"], "config file demo.yaml: no such file (did you mean demo, an embedded config?)"),
        (["train", "--config", "src/rlvr/configs/klear/gppo.yml"], "(did you mean klear/gppo, an embedded config?)"),
        (["compare", "abc.yaml", "--dry-run"], "study file abc.yaml: no such file (did you mean abc, a bundled study?)"),
        (["pipeline", "src/rlvr/configs/pipelines/klear.yaml", "--dry-run"], "(did you mean klear, an embedded pipeline?)"),
        (["train", "--config", "mine.yaml"], "config file mine.yaml: no such file"),
    ],
)  # fmt: skip
def test_a_missing_file_named_as_a_bundled_one_names_it(
    argv, message, tmp_path, monkeypatch, capsys
):
    """README links src/rlvr/configs/demo.yaml: `--config demo.yaml`, or that path from outside
    a checkout (rlvr installed from a wheel), said only "no such file"."""
    monkeypatch.chdir(tmp_path)
    assert rlvr(argv) == 2
    line = _one_error_line(capsys)
    assert line.endswith(message), line


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(ValueError, match="no such file or directory"):
        rlvr(["train", f"data.train={tmp_path / 'missing.jsonl'}", "--debug"])


def test_unknown_command(capsys):
    assert rlvr(["trian"]) == 2
    assert "unknown command 'trian'; valid: train, sft" in _one_error_line(capsys)


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_device_this_machine_lacks_is_one_line(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # no run directory is made, here or anywhere
    device = "cuda:99" if torch.cuda.is_available() else "cuda"
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"prompt": "1 + 1 =", "response": "2"}\n')
    assert rlvr([command, f"data.train={pairs}", f"model.device={device}"]) == 2
    assert f"model.device: device '{device}' is not available" in _one_error_line(capsys)
    assert not (tmp_path / "cache").exists()  # found before the preset is built
    assert not (tmp_path / "runs").exists()


def test_eval_bad_device_is_one_line(tmp_path, capsys):
    data = tmp_path / "q.jsonl"
    data.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    args = ["eval", "--model", str(tmp_path / "m"), "--data", str(data), "--device", "nope"]
    assert rlvr(args) == 2
    assert "device must be auto or a torch device such as cpu" in _one_error_line(capsys)


def test_a_closed_pipe_ends_the_command_quietly():
    """``rlvr data tasks | head -c0`` printed "rlvr: error: [Errno 32] Broken pipe"."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr", "data", "tasks"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader goes away before the command writes
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert stderr == ""


@pytest.mark.parametrize(
    ("command", "row", "key"),
    [
        ("train", {"question": "1 + 1 =", "answer": "2"}, "data.prompt_field"),
        ("train", {"prompt": "1 + 1 =", "solution": "2"}, "data.answer_field"),
        ("sft", {"prompt": "1 + 1 =", "target": "2"}, "data.response_field"),
    ],
)
def test_a_missing_field_names_the_key_that_renames_it(
    command, row, key, tiny_model_dir, tmp_path, capsys
):
    """A file with its own field names stopped with "missing field 'answer'" and no word of
    the keys that name the fields."""
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(row) + "\n")
    run = tmp_path / "run"
    argv = [command, f"data.train={data}", f"model={tiny_model_dir}", f"log.output_dir={run}"]
    assert rlvr(argv) == 2
    line = _one_error_line(capsys)
    assert "missing field" in line and key in line, line
    assert not run.exists()


def test_a_run_directory_given_as_the_model_is_refused_before_anything_loads(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    (run / "checkpoints" / "step_000004").mkdir(parents=True)
    assert rlvr(["train", f"model={run}", f"log.output_dir={tmp_path / 'new'}"]) == 2
    line = _one_error_line(capsys)
    assert f"model.name: {run}: holds no model (no config.json)" in line and "step_000004" in line
    assert not (tmp_path / "cache").exists() and not (tmp_path / "new").exists()


def test_a_run_directory_named_like_a_hub_model_is_refused_as_a_run(tmp_path, monkeypatch, capsys):
    """``model=runs/sft`` (one slash, as a hub id has) skipped the check and stopped in
    transformers: "Unrecognized model in runs/sft. Should have a `model_type` key in its
    config.json"."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "sft" / "checkpoints" / "step_000002").mkdir(parents=True)
    assert rlvr(["train", "model=runs/sft", "log.output_dir=new", "--dry-run"]) == 2
    assert _one_error_line(capsys) == (
        "rlvr: error: model.name: runs/sft: holds no model (no config.json); a run's models are "
        "its checkpoints, e.g. runs/sft/checkpoints/step_000002"
    )
    assert not (tmp_path / "cache").exists() and not (tmp_path / "new").exists()


def _stopped_command(before: str = "") -> str:
    """A script running ``rlvr stopped``, a command that runs ``before`` (a line of its body)
    and is stopped by Ctrl-C."""
    return f"""
import atexit, collections, sys
from rlvr import cli
from rlvr.cli.common import command

@command
def stopped(argv):
    {before}
    raise KeyboardInterrupt

sys.modules["stopped_command"] = type(sys)("stopped_command")
sys.modules["stopped_command"].main = stopped
cli.COMMANDS["stopped"] = ("stopped_command", "a command stopped by Ctrl-C")
sys.argv = ["rlvr", "stopped"]
sys.exit(cli.main())
"""


_INTERRUPTED_COMMAND = _stopped_command()


def test_a_command_stopped_by_ctrl_c_ends_its_process_by_sigint():
    """A command line stopped by Ctrl-C exited with status 130, so a shell script that ran
    it (and got the same Ctrl-C) went on to its next line; the process now ends by SIGINT,
    as Python does for an uncaught KeyboardInterrupt, with no traceback."""
    import signal
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_COMMAND], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGINT, done.stderr
    assert done.stderr == "rlvr: interrupted\n"


_INTERRUPTED_AFTER_AN_EVAL_AT_EXIT = _stopped_command(
    'atexit.register(lambda: collections.namedtuple("T", "a b"))  # evaluates a string'
)


def test_a_command_stopped_by_ctrl_c_ends_by_sigint_whatever_its_exit_functions_do():
    """``rlvr sft`` stopped by Ctrl-C exited with status 1: torch's ``dump_compile_times``
    exit function builds namedtuples (``eval``), which in CPython 3.11 makes the interpreter
    forget that a KeyboardInterrupt ended the program. Here the command registers such an
    exit function, as its imports register torch's."""
    import signal
    import subprocess
    import sys

    code = _INTERRUPTED_AFTER_AN_EVAL_AT_EXIT
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGINT, done.stderr
    assert done.stderr == "rlvr: interrupted\n"


@pytest.mark.parametrize(("stop", "status"), [(KeyboardInterrupt(), 130), ("SIGTERM", 143)])
def test_a_stopped_command_exits_as_the_signal_would(stop, status, capsys):
    """A run stopped by SIGTERM (a cluster's pre-emption) exited 130, as after Ctrl-C; a
    scheduler reads 143 (128 + SIGTERM), the status the signal's default action gives."""
    import signal

    from rlvr.cli.common import command
    from rlvr.train.interrupt import Stopped

    def body(argv):
        raise Stopped(signal.SIGTERM) if stop == "SIGTERM" else stop

    assert command(body)([]) == status
    assert capsys.readouterr().err == "rlvr: interrupted\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "data.train={empty}"], "data.train: {empty}: no rows"),
        (["train", "--dry-run", "data.train={empty}"], "data.train: {empty}: no rows"),
        (
            ["train", "--dry-run", "data.train={one}", "data.eval={empty}"],
            "data.eval: {empty}: no rows",
        ),
        (["sft", "data.train={empty}"], "data.train: {empty}: no rows"),
        (["eval", "--data", "{empty}"], "--data {empty}: no rows"),
        (["eval", "--dry-run", "--data", "{empty}"], "--data {empty}: no rows"),
        (
            ["train", "--dry-run", "data.template=Question"],
            "data.template must contain '{{prompt}}', got 'Question'",
        ),
        (
            ["eval", "--dry-run", "--data", "{one}", "--template", "Question"],
            "--template must contain '{{prompt}}', got 'Question'",
        ),
    ],
)
def test_an_empty_data_file_and_a_template_without_its_place_name_the_key(
    argv, message, tiny_model_dir, tmp_path, capsys
):
    """`empty.jsonl: no rows` and `template must contain '{prompt}'` named no key, as other
    errors do; the template was found only once the run read its data (not by --dry-run)."""
    files = {"empty": tmp_path / "empty.jsonl", "one": tmp_path / "one.jsonl"}
    files["empty"].write_text("")
    files["one"].write_text('{"prompt": "1 + 1 =", "answer": "2", "response": "2"}\n')
    if argv[0] == "eval":
        rest = ["--model", str(tiny_model_dir), "--output", str(tmp_path / "eval.json")]
    else:
        rest = [f"model={tiny_model_dir}", f"log.output_dir={tmp_path / 'run'}"]
    assert rlvr([a.format(**files) for a in argv] + rest) == 2
    assert _one_error_line(capsys) == "rlvr: error: " + message.format(**files)


@pytest.mark.parametrize("argv", [["sft"], ["sft", "model=tiny", "epochs=2"]])
def test_sft_without_data_names_the_key_to_give(argv, capsys):
    """With no config file the error pointed at a YAML file: "missing required key(s) data (or
    inherit them: base: klear/sft in the YAML file)"."""
    assert rlvr(argv) == 2
    assert _one_error_line(capsys) == (
        "rlvr: error: config: missing required key(s) data.train: give them as key=value "
        "(data.train=...) or in a config file"
    )


def test_a_misspelt_required_key_is_still_named_as_unknown(capsys):
    assert rlvr(["sft", "data.trian=pairs.jsonl"]) == 2
    assert "unknown key 'data.trian'; valid keys of data: train," in _one_error_line(capsys)


@pytest.mark.parametrize(
    "argv",
    [["data", "show", "{run}"], ["train", "data.train={run}", "--dry-run"]],
    ids=["data-show", "train"],
)
def test_a_run_directory_given_as_data_is_one_line(argv, tmp_path, capsys):
    """A run's folder read as a data folder: `datasets` printed "Generating train split" and
    failed on the columns of its metrics and samples ("Couldn't cast ... column names don't
    match")."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("steps: 1\n")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    (run / "samples.jsonl").write_text('{"step": 1, "completion": "2"}\n')
    assert rlvr([arg.format(run=run) for arg in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert (
        f"{run}: an rlvr run's directory, not data; give the file of its problems" in captured.err
    )


def _torch_saved(obj) -> bytes:
    """What ``torch.save`` writes of ``obj`` (a checkpoint's ``trainer_state.pt``)."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _safetensors_bytes() -> bytes:
    """A safetensors file of 32 float32 ones."""
    import torch
    from safetensors.torch import save

    return save({"w": torch.ones(32)})


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        (
            "metrics.jsonl.gz",
            __import__("gzip").compress(b'{"step": 1, "reward/mean": 0.5}\n'),
            "not UTF-8 text (byte 0x8b at byte 2); it is gzip-compressed: unpack it first (gunzip)",
        ),
        (
            "config.yaml",
            b"steps: 2\nmodel:\n  name: tiny\n",
            "not a metrics.jsonl (none of its lines is a JSON row); give a run's directory or "
            "its metrics.jsonl",
        ),
        (
            "step_000000.json",
            b'{\n  "model": "tiny",\n  "problems": [\n    "x"\n  ]\n}\n',
            "not a metrics.jsonl (none of its lines is a JSON row); give a run's directory or "
            "its metrics.jsonl",
        ),
        (  # a zip: it said "it is a zip archive: unpack it first (unzip)"
            "trainer_state.pt",
            _torch_saved({"step": 2}),
            "not UTF-8 text (byte 0x80 at byte 65); it is a PyTorch checkpoint (torch.save), "
            "not a metrics.jsonl",
        ),
        (
            "model.safetensors",
            _safetensors_bytes(),
            "not UTF-8 text (byte 0x80 at byte 75); it is a safetensors weights file, not a "
            "metrics.jsonl",
        ),
    ],
    ids=["gzipped", "config", "eval-report", "checkpoint", "safetensors"],
)
def test_plot_of_a_file_that_is_no_metrics_file_names_it(name, content, said, tmp_path, capsys):
    """`rlvr plot metrics.jsonl.gz` said only "'utf-8' codec can't decode byte 0x8b in position
    1"; a run's config.yaml warned "3 line(s) not JSON" and then found nothing to plot; an
    eval report stopped at "row 1 is a str, not a JSON object"."""
    path = tmp_path / name
    path.write_bytes(content)
    assert rlvr(["plot", str(path), "--out", str(tmp_path / "plots")]) == 2
    assert _one_error_line(capsys) == f"rlvr: error: {path}: {said}"


def test_a_folder_whose_files_hold_other_columns_names_them(tmp_path, capsys, monkeypatch):
    """A folder of JSON lines files with different fields (the bundled assets: chain sums as
    rlvr data gen writes them, worked pairs, plain problems) stopped with `Couldn't cast ...
    because column names don't match`, naming no file; a folder of CSV files said which."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    (folder / "b.jsonl").write_text('{"id": "q1", "question": "2 + 2 =", "answer": "4"}\n')
    assert rlvr(["data", "show", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"rlvr: error: {folder}: its files have different columns (a.jsonl: prompt, answer; "
        "b.jsonl: id, question, answer)"
    )
