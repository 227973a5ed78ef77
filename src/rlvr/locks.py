"""One process at a time in a folder: a lock file held while a run or a pipeline writes
there (``filelock``: the lock goes with the process, also when it is killed)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


@contextlib.contextmanager
def holding(lock_file: Path, busy: str) -> Iterator[None]:
    """Hold ``lock_file`` (its folder made) for the block; ``ValueError(busy)`` at once when
    another holder has it (another process, or another lock on it in this one)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_file)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ValueError(busy) from None
    try:
        yield
    finally:
        lock.release()


def refuse_if_held(lock_file: Path, busy: str) -> None:
    """``ValueError(busy)`` when ``lock_file`` exists and is held; creates nothing."""
    if lock_file.is_file():
        with holding(lock_file, busy):
            pass
