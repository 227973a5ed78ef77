"""The one pool of helper processes: answers in order, overdue and dead helpers replaced."""

from __future__ import annotations

import os
import time

import pytest

from rlvr.sandbox.workers import DIED, OVERDUE, Pool, connect, serve


def _answer(message, outbox) -> None:
    if message == "die":
        os._exit(3)
    if message == "hang":
        time.sleep(60)
    outbox.send((message, os.getpid()))


def echo_main(read_fd: int, write_fd: int) -> None:
    """Helper: greeted with "hello", answers each message with (message, pid)."""
    inbox, outbox = connect(read_fd, write_fd)
    if inbox.recv() != "hello":
        os._exit(1)
    outbox.send("ready")
    serve(inbox, outbox, _answer)


def test_map_answers_in_order_and_replaces_overdue_and_dead_helpers():
    pool = Pool(echo_main, greeting="hello", keep=2)
    try:
        answers = pool.map(["a", "hang", "b", "die", "c"], size=2, limit_s=1.0)
        assert [a if a in (DIED, OVERDUE) else a[0] for a in answers] == [
            "a",
            OVERDUE,
            "b",
            DIED,
            "c",
        ]
        # the hung and the dead helper are gone; the one that answered "c" waits for reuse
        assert [h.process.pid for h in pool.idle] == [answers[4][1]]
        assert pool.map(["d"], size=2, limit_s=5.0) == [("d", answers[4][1])]
    finally:
        pool.close()
    assert pool.idle == []


def test_a_helper_that_does_not_greet_back_fails_to_start():
    pool = Pool(echo_main, greeting="not hello", start_error="no greeting")
    with pytest.raises(RuntimeError, match="no greeting"):
        pool.take()
