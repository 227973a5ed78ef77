"""``rlvr.locks``: one process at a time in a folder."""

import subprocess
import sys

import pytest
from filelock import FileLock

from rlvr.locks import holding, refuse_if_held


def test_a_held_lock_refuses_a_second_holder_and_is_free_after(tmp_path):
    lock = tmp_path / "made" / ".x.lock"
    with holding(lock, "busy here"), pytest.raises(ValueError, match="^busy here$"):
        refuse_if_held(lock, "busy here")
    refuse_if_held(lock, "busy here")
    refuse_if_held(tmp_path / "never" / ".x.lock", "busy")  # no file: nothing made
    assert not (tmp_path / "never").exists()


def test_a_filesystem_without_locks_runs_the_block_with_a_warning(tmp_path, monkeypatch):
    """An older filelock raises NotImplementedError where flock is missing (some network
    mounts): the run the lock guards would stop with a traceback."""

    def no_flock(self, *args, **kwargs):
        raise NotImplementedError("FileSystem does not appear to support flock")

    monkeypatch.setattr(FileLock, "acquire", no_flock)
    ran = []
    lock = tmp_path / ".x.lock"
    lock.touch()  # as a run that held it left it
    with pytest.warns(UserWarning, match="cannot lock files; not locked") as said:
        refuse_if_held(lock, "busy")  # the check at start: silent, the holder says it
        with holding(lock, "busy"):
            ran.append(True)
    assert ran == [True] and len(said) == 1


_HOLD_WITHOUT_FLOCK = """
import errno, fcntl, sys, time, warnings
from pathlib import Path

def no_flock(*args, **kwargs):
    raise OSError(errno.ENOSYS, "no flock on this filesystem")

fcntl.flock = no_flock
warnings.simplefilter("ignore")
from rlvr.locks import holding

try:
    with holding(Path(sys.argv[1]), "busy"):
        print("held", flush=True)
        if sys.argv[2] == "hold":
            time.sleep(60)
except ValueError as err:
    print(err, flush=True)
"""


def test_without_flock_a_killed_holder_frees_the_folder(tmp_path):
    """Where flock is missing, filelock keeps a marker file naming its process instead: a
    live holder still refuses a second one, and a killed one (SIGKILL: no release) does not
    lock the run directory for good."""
    lock = tmp_path / ".run.lock"

    def start(mode: str) -> subprocess.Popen:
        argv = [sys.executable, "-c", _HOLD_WITHOUT_FLOCK, str(lock), mode]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)

    holder = start("hold")
    try:
        assert holder.stdout.readline().strip() == "held"
        assert start("once").communicate(timeout=60)[0].strip() == "busy"
    finally:
        holder.kill()
        holder.wait()
    assert start("once").communicate(timeout=60)[0].strip() == "held"
