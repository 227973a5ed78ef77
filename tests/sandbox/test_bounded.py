"""Bounded calls: a helper process cut off by time or memory, from any thread."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr.sandbox import bounded
from rlvr.sandbox.bounded import LimitExceeded, call_bounded


def test_result_comes_back_and_the_helper_is_reused():
    assert call_bounded(divmod, 17, 5) == (3, 2)
    pid = bounded._pool(bounded.DEFAULT_MEMORY_MB).idle[-1].process.pid
    assert call_bounded(sorted, [3, 1, 2]) == [1, 2, 3]
    assert bounded._pool(bounded.DEFAULT_MEMORY_MB).idle[-1].process.pid == pid


def test_long_c_call_is_cut_off_at_the_deadline():
    started = time.monotonic()
    with pytest.raises(LimitExceeded, match="ran past 0.5 s"):
        call_bounded(pow, 9, 9**9, timeout_s=0.5)  # 370 million digits in one C call
    assert time.monotonic() - started < 1.5
    assert call_bounded(divmod, 7, 2) == (3, 1)  # a fresh helper answers the next call


def test_allocation_past_the_memory_limit_is_cut_off():
    with pytest.raises(LimitExceeded, match="out of memory"):
        call_bounded(bytearray, 2 << 30, memory_mb=256)


def test_other_exceptions_come_back_as_runtime_errors():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        call_bounded(divmod, 1, 0)
    assert call_bounded(divmod, 1, 1) == (1, 0)


def test_calls_from_several_threads_at_once():
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda n: call_bounded(pow, n, 2), range(9)))
    assert results == [n * n for n in range(9)]


def test_invalid_limits_are_rejected():
    with pytest.raises(ValueError, match="positive"):
        call_bounded(divmod, 1, 1, timeout_s=0)


def test_killing_the_callers_process_group_kills_its_helper(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    caller = (
        "from rlvr.sandbox import bounded\n"
        "bounded.call_bounded(divmod, 1, 1)\n"
        "print(bounded._pool(bounded.DEFAULT_MEMORY_MB).idle[-1].process.pid, flush=True)\n"
        "bounded.call_bounded(pow, 9, 9**9, timeout_s=60)\n"  # busy in the helper
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-c", caller],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        helper = int(proc.stdout.readline())
        time.sleep(0.3)
        assert os.path.exists(f"/proc/{helper}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # what the scorer does to an overdue worker
        proc.wait()
        proc.stdout.close()

    def gone() -> bool:
        try:
            with open(f"/proc/{helper}/stat") as f:
                return f.read().split(") ")[1].startswith("Z")  # a zombie is dead
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 5
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(), "the helper outlived its caller"
