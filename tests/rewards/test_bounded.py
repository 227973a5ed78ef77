"""Bounded calls: a helper process cut off by time or memory, from any thread."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr.rewards import bounded
from rlvr.rewards.bounded import LimitExceeded, call_bounded


def test_result_comes_back_and_the_helper_is_reused():
    assert call_bounded(divmod, 17, 5) == (3, 2)
    pid = bounded._POOL.idle[-1].process.pid
    assert call_bounded(sorted, [3, 1, 2]) == [1, 2, 3]
    assert bounded._POOL.idle[-1].process.pid == pid


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
