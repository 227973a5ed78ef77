"""``rlvr.locks``: one process at a time in a folder."""

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
