"""`pip install rlvr` gives a working tool: every data file ships, and an installed wheel runs
its commands from outside the repository."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rlvr"


def _tracked_data_files() -> list[str]:
    """Files of the package that are not Python modules, relative to ``src/rlvr``."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "src/rlvr"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [str(Path(p).relative_to("src/rlvr")) for p in listed if not p.endswith(".py")]


def _globbed(path: str, pattern: str) -> bool:
    """Whether setuptools' glob ``pattern`` takes ``path`` (a ``*`` stays within one folder)."""
    parts, wanted = path.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


def test_every_data_file_of_the_package_is_in_its_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["rlvr"]
    files = _tracked_data_files()
    assert any(f.startswith("configs/") for f in files)  # the listing found the recipes
    missing = [f for f in files if not any(_globbed(f, p) for p in patterns)]
    assert not missing, f"not shipped in the wheel (pyproject package-data): {missing}"


def _copy_sources(target: Path) -> None:
    """What a build reads (pyproject.toml, README.md, src/), without build outputs."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, target / name)
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", target / "src", ignore=ignored)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_no_module_needs_a_newer_python_than_pyproject_allows() -> None:
    """The tests run on one Python; pyproject promises every Python from ``requires-python``.
    ``vermin`` (a dev dependency) reads each module for the newest syntax and standard-library
    names it uses: ``hashlib.file_digest`` (3.11) broke ``rlvr pipeline``'s data stages on 3.10.
    ``long`` is left out: vermin takes ``torch.long`` for Python 2's builtin."""
    script = Path(sysconfig.get_path("scripts")) / "vermin"
    if not script.exists():
        pytest.skip("vermin is not installed (pip install -e '.[dev]')")
    oldest = re.search(r'requires-python = ">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert oldest is not None, 'pyproject.toml: requires-python = ">=3.N" expected'
    argv = [str(script), f"-t={oldest[1]}-", "--eval-annotations", "--exclude", "long"]
    argv += ["--no-tips", "--violations", "-q", "src", "tests", "bench"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"needs a newer Python than {oldest[1]}:\n{done.stdout}"


@pytest.mark.slow
def test_an_installed_wheel_runs_its_commands_outside_the_repository(tmp_path: Path) -> None:
    """The wheel, installed without the sources: it finds its recipes, studies, claims and
    assets, and the sandbox starts its child from the installed files."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    wheels, source = tmp_path / "wheels", tmp_path / "source"
    _copy_sources(source)  # not in place: a stale build/ there would hide a missing file
    build = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation"]
    _run([*build, "-q", "-w", str(wheels)], tmp_path, env)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    python = str(venv / "bin" / "python")
    site = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path, env
    )
    # The dependencies come from this environment; rlvr itself only from the wheel.
    Path(site.strip(), "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    wheel = next(wheels.glob("rlvr-*.whl"))
    _run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env
    )

    where = _run([python, "-c", "import rlvr; print(rlvr.__file__)"], tmp_path, env)
    assert Path(where.strip()).is_relative_to(venv)
    rlvr = str(venv / "bin" / "rlvr")
    assert "evidence-smollm2-bounds-confirm" in _run([rlvr, "compare", "--list"], tmp_path, env)
    assert "objective:" in _run(
        [rlvr, "train", "--config", "klear/gppo", "--dry-run"], tmp_path, env
    )
    plan = _run(
        [rlvr, "compare", "abc", "--dry-run", "--out", str(tmp_path / "runs")], tmp_path, env
    )
    assert plan.count("run") >= 6  # 2 arms x 3 seeds
    sandbox = "from rlvr.sandbox import run_untrusted; print(run_untrusted('print(6 * 7)').stdout)"
    assert _run([python, "-c", sandbox], tmp_path, env).strip() == "42"
