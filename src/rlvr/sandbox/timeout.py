"""Wall-clock limits for verifier calls that work on any thread.

``math-verify`` guards its own parsing with ``signal.alarm``, which only works on the main
thread of the main interpreter; the verifiers here switch that off and the scorer wraps
each call in :func:`time_limit` instead. It arms a watchdog timer that, when the limit
passes, raises :class:`VerifierTimeout` inside the thread that is running the verifier
(``PyThreadState_SetAsyncExc``), so it works on the main thread and on worker threads
alike and leaves the process's signal handlers alone.

Like a signal handler, the asynchronous exception is delivered between Python bytecodes:
a single long C call (e.g. a huge integer power inside SymPy) runs to completion first.
The worker processes of :class:`rlvr.rewards.scoring.Scorer` are the hard limit for
those: a worker that overruns is killed.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class VerifierTimeout(BaseException):
    """A verifier ran past its time limit.

    Derived from ``BaseException`` so that the ``except Exception`` blocks inside
    ``math-verify`` and SymPy cannot swallow it and turn a timeout into a wrong answer.
    """


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Schedule ``exc_type`` in thread ``thread_id`` (``None`` clears a pending one)."""
    target = ctypes.py_object(exc_type) if exc_type is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`VerifierTimeout` in this thread if the block runs past ``seconds``.

    ``None`` or a non-positive value disables the limit.

    >>> with time_limit(5.0):
    ...     total = sum(range(1000))
    >>> total
    499500
    """
    if seconds is None or seconds <= 0:
        yield
        return
    thread_id = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                _raise_in_thread(thread_id, VerifierTimeout)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        timer.cancel()
        if state["fired"]:
            _raise_in_thread(thread_id, None)  # drop the exception if it is still pending
    if state["fired"]:
        raise VerifierTimeout(f"verifier ran past {seconds:g} s")
