"""Every shell command in README.md and docs/**/*.md runs as written, or at least parses.

How each is checked, in a scratch folder that holds the files the docs name as examples
(``my.yaml``, ``pairs.jsonl``, ``runs/...``: :func:`sandbox`):

- ``rlvr train`` / ``sft`` / ``pipeline``, and ``compare`` of a study: ``--dry-run`` (every
  key, value and file the configuration names is checked; nothing trains);
- ``rlvr eval``: run on 2 problems with a small random model in place of the named one, or
  ``--dry-run`` where it is marked; ``rlvr data``, ``plot``, ``compare --list``: run;
- ``python SCRIPT``: run, or where it is marked only its arguments parsed (argparse);
  ``python -m MODULE`` of another package: marked, and the files it names exist;
- ``make TARGET``: ``make -n`` (the target exists); ``pip install``: the extras exist;
  ``bash SCRIPT``: ``bash -n``.

A command marked ``needs a GPU`` / ``needs the hub`` / ``long run`` (``docs_commands``) is
only parsed; one that names a hub model or data set, or a CUDA device, must carry the mark.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs_commands import ROOT, Command, commands, doc_files, program, stray_commands

COMMANDS = [c for path in doc_files() for c in commands(path)]
RUN_AS_DRY = {"train", "sft", "pipeline", "compare"}
"""``rlvr`` sub-commands checked with ``--dry-run`` (``compare --list`` runs as written)."""
EVAL_SMALL = ["--limit", "2", "--max-tokens", "8", "--batch-size", "2"]


class Parsed(Exception):
    """Raised by the patched argparse once a script's arguments parsed."""


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _fake_run(run: Path, model: Path | None = None, *, sft: bool = False) -> None:
    """A finished run's files (of ``rlvr sft`` with ``sft``): config.yaml, metrics.jsonl and a
    checkpoint (``model``)."""
    from rlvr.train.config import SFTConfig, TrainConfig
    from rlvr.train.overrides import dump_yaml, load_config

    run.mkdir(parents=True)
    cls, name, data = (
        (SFTConfig, "sft", ["data.train=pairs.jsonl"]) if sft else (TrainConfig, "demo", [])
    )
    config = load_config(cls, name, [*data, f"log.output_dir={run}"])
    (run / "config.yaml").write_text(dump_yaml(config))
    _write_jsonl(run / "metrics.jsonl", [{"step": s, "reward/mean": s / 10} for s in (1, 2)])
    if model is not None:
        shutil.copytree(model, run / "checkpoints" / "step_000060")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, tiny_model_dir) -> Path:
    """A working folder like the checkout's root, with the example files the commands name."""
    from rlvr.data import gym_rows

    root = tmp_path_factory.mktemp("docs-commands")
    for folder in ("src", "examples", "bench", "docs"):  # commands run from the checkout's root
        (root / folder).symlink_to(ROOT / folder)
    shutil.copy(ROOT / "src/rlvr/configs/demo.yaml", root / "my.yaml")
    klear = (ROOT / "src/rlvr/configs/pipelines/klear.yaml").read_text()
    (root / "my_pipeline.yaml").write_text(klear.replace("../../assets/", "./src/rlvr/assets/"))
    shutil.copy(ROOT / "src/rlvr/compare/studies/abc.yaml", root / "my_study.yaml")
    shutil.copy(ROOT / "src/rlvr/assets/math-mini.jsonl", root / "a.jsonl")
    shutil.copy(ROOT / "src/rlvr/assets/chain_sum-worked.jsonl", root / "raw.jsonl")
    rows = gym_rows("chain_sum", size=4, seed=0, config={"max_terms": 3})
    for name in ("b.jsonl", "chain_sum.jsonl", "data/train.jsonl", "data/test.jsonl"):
        _write_jsonl(root / name, rows)
    _write_jsonl(root / "pairs.jsonl", [{"prompt": "1 + 1 =", "response": "2"}] * 4)
    _own_data(root, tiny_model_dir)
    _fake_run(root / "runs" / "demo-20261122-101500", tiny_model_dir)
    for name in ("demo-20260101-120000", "a", "b"):
        _fake_run(root / "runs" / name)
    for name in ("grpo", "abc"):  # two finished demo runs, compared by rlvr eval --against
        _fake_run(root / "runs" / name, tiny_model_dir)
    _fake_run(root / "runs" / "sft-20260101-120000", sft=True)
    _report_to_compare_with(root)
    shutil.copytree(tiny_model_dir, root / "runs" / "ckpt")
    shutil.copytree(tiny_model_dir, root / "sft-model")
    return root


def _own_data(root: Path, tiny_model_dir: Path) -> None:
    """The files of training.md's "Your own model and data": a model folder, chat SFT rows,
    GSM8K and MATH rows."""
    shutil.copytree(tiny_model_dir, root / "my-model")
    reply = [{"role": "user", "content": "1 + 1 ="}, {"role": "assistant", "content": "2"}]
    _write_jsonl(root / "chat.jsonl", [{"messages": reply}] * 4)
    _write_jsonl(root / "gsm.jsonl", [{"question": "1 + 1 =", "answer": "1 + 1 = 2\n#### 2"}] * 4)
    rows = [{"problem": "1 + 1 =", "solution": "$1 + 1 = \\boxed{2}$"}] * 4
    _write_jsonl(root / "math.jsonl", rows)


def _report_to_compare_with(root: Path) -> None:
    """``grpo.json``, the report ``rlvr eval --against grpo.json`` reads, made as the command
    before it in docs/evaluation.md makes it (which also runs, and writes it again), and a
    copy as the demo run's ``eval_reports/step_000000.json`` (the same problems)."""
    from rlvr.cli.eval import main

    checkpoint = root / "runs" / "grpo" / "checkpoints" / "step_000060"
    output = root / "grpo.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--model", str(checkpoint), *EVAL_SMALL, "--output", str(output)]) == 0
    # a run's report of its evaluation before training, for --against <run>/eval_reports/...
    reports = root / "runs" / "demo-20261122-101500" / "eval_reports"
    reports.mkdir()
    shutil.copy(output, reports / "step_000000.json")


def _needed_marks(cmd: Command, sandbox: Path) -> set[str]:
    """The marks a command must carry: ``gpu`` for CUDA/vLLM-on-GPU, ``hub`` for a download."""
    from rlvr.data import DATASETS
    from rlvr.models import preset_names

    needed = set()
    words = cmd.argv
    if any("cuda" in w for w in words) or "--vllm" in words or "verl.trainer" in cmd.text:
        needed.add("gpu")
    for i, word in enumerate(words):
        key, eq, value = word.partition("=")
        name = value if eq and key in ("model", "model.name") else None
        if i and words[i - 1] == "--model":
            name = word
        local = name is None or name in preset_names() or (sandbox / name).exists()
        if not local or (i and words[i - 1] == "--data" and word in DATASETS):
            needed.add("hub")
    return needed


@contextlib.contextmanager
def _in(sandbox: Path, env: dict[str, str], monkeypatch):
    """Run inside ``sandbox`` with the command's environment words set."""
    monkeypatch.chdir(sandbox)
    for key, value in env.items():
        if key != "PYTHONPATH":  # this checkout's src is on the path already
            monkeypatch.setenv(key, value)
    yield


def _rlvr(cmd: Command, argv: list[str], tiny: Path) -> list[str]:
    """The ``rlvr`` arguments the test runs for a documented ``rlvr`` command."""
    sub, args = (argv[0], argv[1:]) if argv else ("", [])
    if sub in RUN_AS_DRY and not {"--list", "--dry-run"} & set(args):
        return [sub, *args, "--dry-run"]
    if sub == "eval" and cmd.markers:
        return [sub, *args, "--dry-run"]
    if sub == "eval":
        args = [str(tiny) if a == "tiny" else a for a in args]
        output = [] if "--output" in args else ["--output", "eval.json"]
        written = Path([*args, *output][[*args, *output].index("--output") + 1])
        written.unlink(missing_ok=True)  # as on its own: an earlier report there is refused
        return [sub, *args, *EVAL_SMALL, *output]
    return [sub, *args]


def _run_rlvr(args: list[str]) -> str | None:
    from rlvr.cli import main

    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(args)
    except Parsed:  # a marked command with no --dry-run: its arguments parsed
        return None
    except SystemExit as exit_:
        code = exit_.code
    return None if code == 0 else f"rlvr {' '.join(args)} -> exit {code}: {err.getvalue()[-1500:]}"


def _parse_only(monkeypatch):
    """Make argparse stop the script (with :class:`Parsed`) once its arguments parsed."""
    original = argparse.ArgumentParser.parse_known_args

    def parse(self, args=None, namespace=None):
        parsed = original(self, args, namespace)
        if parsed[1]:
            self.error(f"unrecognized arguments: {' '.join(parsed[1])}")
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse)


def _run_script(cmd: Command, script: str, args: list[str], monkeypatch) -> str | None:
    path = ROOT / script
    if not path.is_file():
        return f"{script}: no such file"
    if cmd.markers:
        _parse_only(monkeypatch)
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    monkeypatch.syspath_prepend(str(path.parent))
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            runpy.run_path(str(path), run_name="__main__")
    except Parsed:
        return None
    except SystemExit as exit_:
        return None if exit_.code in (0, None) else f"exit {exit_.code}: {err.getvalue()[-1500:]}"
    return None if not cmd.markers else f"{script} parsed no arguments (argparse) to check"


def _python(cmd: Command, argv: list[str], tiny: Path, monkeypatch) -> str | None:
    if argv[:2] == ["-m", "rlvr"]:
        return _run_rlvr(_rlvr(cmd, argv[2:], tiny))
    if argv[:2] == ["-m", "pytest"]:
        return _pytest_options(argv[2:])
    if argv[0] == "-m":
        if not cmd.markers:
            return f"python -m {argv[1]} runs another package's program: mark what it needs"
        missing = [v for w in argv[2:] if (v := w.partition("=")[2]).endswith(".py")]
        missing = [v for v in missing if not (ROOT / v).is_file()]
        return f"no such file: {missing}" if missing else None
    return _run_script(cmd, argv[0], argv[1:], monkeypatch)


def _pytest_options(args: list[str]) -> str | None:
    """``python -m pytest`` options: the markers named exist (``-m 'not slow'``)."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    marks = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    known = {line.split(":")[0] for line in marks["markers"]}
    named = [w for i, w in enumerate(args) if i and args[i - 1] == "-m"]
    words = {t for expr in named for t in expr.replace("(", " ").replace(")", " ").split()}
    unknown = words - known - {"not", "and", "or"}
    return f"unknown pytest markers {sorted(unknown)}" if unknown else None


def _make(argv: list[str]) -> str | None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    run = subprocess.run(
        ["make", "-n", "-C", str(ROOT), *argv], capture_output=True, text=True, check=False
    )
    return None if run.returncode == 0 else run.stderr.strip()[-500:]


def _pip(argv: list[str]) -> str | None:
    """``pip install``: the project's extras named (``.[dev]``, ``rlvr[trl]``) exist."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    named = [w for w in argv if w.startswith((".[", f"{project['name']}["))]
    unknown = [e for w in named for e in w[w.index("[") + 1 : -1].split(",") if e not in extras]
    return f"no such extra in pyproject.toml: {unknown}" if unknown else None


def check(cmd: Command, sandbox: Path, tiny: Path, monkeypatch) -> str | None:
    """Why the command fails its check (``None``: it passes)."""
    if not cmd.argv:
        return "no program (a fragment? fence it as text)"
    name, argv = program(cmd.argv[0]), cmd.argv[1:]
    if name in ("torchrun", "accelerate"):  # the script and its arguments
        script = next((i for i, w in enumerate(argv) if w.endswith(".py")), len(argv))
        name, argv = "python", argv[script:]
    with _in(sandbox, cmd.env, monkeypatch):
        if name == "rlvr":
            if cmd.markers and argv[:1] == ["data"]:  # rlvr data has no --dry-run: parse only
                _parse_only(monkeypatch)
            return _run_rlvr(_rlvr(cmd, argv, tiny))
        if name in ("python", "python3") and argv:
            return _python(cmd, argv, tiny, monkeypatch)
        if name == "make":
            return _make(argv)
        if name == "pip":
            return _pip(argv)
        if name == "bash" and argv:
            ok = subprocess.run(["bash", "-n", str(ROOT / argv[0])], check=False).returncode == 0
            return None if ok else f"bash -n {argv[0]} failed"
    return f"no check for {name!r}: add one to tests/test_docs_commands.py"


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_documented_command(cmd, sandbox, tiny_model_dir, monkeypatch):
    missing = _needed_marks(cmd, sandbox) - cmd.markers
    names = {"gpu": "needs a GPU", "hub": "needs the hub"}
    assert not missing, (
        f"{cmd.where}: {cmd.text}\nmark it: # {', '.join(names[m] for m in missing)}"
    )
    why = check(cmd, sandbox, tiny_model_dir, monkeypatch)
    assert why is None, f"{cmd.where}: {cmd.text}\n{why}"


def test_every_command_block_is_fenced_as_shell():
    stray = [line for path in doc_files() for line in stray_commands(path)]
    assert not stray, "commands outside a bash/console block:\n" + "\n".join(stray)


def test_blocks_give_commands_with_their_lines_environment_and_marks(tmp_path, monkeypatch):
    import docs_commands
    from docs_commands import parse_command

    doc = tmp_path / "doc.md"
    doc.write_text(
        "text\n```bash\n# a comment line\nA=1 rlvr eval --model m \\\n    --data d  # needs the hub\n"
        "make lint\n```\n```console\n$ python x.py   # long run\noutput\n```\n"
    )
    monkeypatch.setattr(docs_commands, "ROOT", tmp_path)  # files are named from the root
    found = commands(doc)
    assert [(c.where, c.env, c.argv, set(c.markers)) for c in found] == [
        ("doc.md:4", {"A": "1"}, ["rlvr", "eval", "--model", "m", "--data", "d"], {"hub"}),
        ("doc.md:6", {}, ["make", "lint"], set()),
        ("doc.md:9", {}, ["python", "x.py"], {"long"}),
    ]
    assert parse_command("x:1", "rlvr train", "needs a GPU, long run").markers == {"gpu", "long"}


@pytest.mark.parametrize(
    "text, comment, error",
    [
        ("rlvr train objective.nope=1", "", "nope"),
        ("rlvr train --config missing.yaml", "", "missing.yaml"),
        ("rlvr eval --model tiny --data a.jsonl --nope", "", "unrecognized arguments"),
        ("rlvr data gen chain_sum --size 2 -o x.jsonl --set nope=1", "", "exit"),
        ("python bench/objectives.py --nope", "long run", "unrecognized arguments"),
        ("python bench/missing.py", "long run", "no such file"),
        ("python -m verl.trainer.main_ppo x.path=examples/nope.py", "needs a GPU", "no such file"),
        ("make nope", "", "nope"),
        ("pip install -e .[nope]", "", "no such extra"),
        ("python -m pytest -m 'not slowly'", "", "unknown pytest markers"),
    ],
)
def test_a_broken_command_fails_its_check(
    text, comment, error, sandbox, tiny_model_dir, monkeypatch
):
    from docs_commands import parse_command

    why = check(parse_command("x:1", text, comment), sandbox, tiny_model_dir, monkeypatch)
    assert why is not None and error in why


def test_a_hub_model_or_a_cuda_device_needs_its_mark(sandbox):
    from docs_commands import parse_command

    def needed(text):
        return _needed_marks(parse_command("x:1", text, ""), sandbox)

    assert needed("rlvr train model=Org/Model") == {"hub"}
    assert needed("rlvr eval --model tiny --data math500") == {"hub"}
    assert needed("rlvr eval --model runs/ckpt --data a.jsonl") == set()
    assert needed("rlvr train model.device=cuda") == {"gpu"}
