"""One process at a time in a folder: a lock file held while a run or a pipeline writes
there (``filelock``: the lock goes with the process, also when it is killed)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


@contextlib.contextmanager
def holding(lock_file: Path, busy: str) -> Iterator[None]:
    """Hold ``lock_file`` (its folder made) for the block; ``ValueError(busy)`` at once when
    another holder has it (another process, or another lock on it in this one). On a
    filesystem without file locks (some network mounts) filelock keeps a marker file naming
    the holder's process instead (freed when that process is gone); where it refuses to
    (older versions), the block runs unlocked with a warning: a lock must not stop the run
    it guards."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_file)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ValueError(busy) from None
    except NotImplementedError:  # no flock on this filesystem (an older filelock says so)
        warnings.warn(f"{lock_file}: this filesystem cannot lock files; not locked", stacklevel=3)
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def refuse_if_held(lock_file: Path, busy: str) -> None:
    """``ValueError(busy)`` when ``lock_file`` exists and is held; creates nothing."""
    if lock_file.is_file():
        with warnings.catch_warnings():  # a filesystem without locks: the holder says so
            warnings.simplefilter("ignore")
            with holding(lock_file, busy):
                pass
