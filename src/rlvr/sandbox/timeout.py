"""Wall-clock limits on any thread: :func:`time_limit`.

A watchdog timer raises :class:`VerifierTimeout` inside the thread running the block
(``PyThreadState_SetAsyncExc``), so unlike ``signal.alarm`` it works off the main thread and
leaves signal handlers alone. Like a signal, it arrives between bytecodes: one long C call
(a huge integer power) runs to its end first; a killed helper process
(:mod:`rlvr.sandbox.workers`) is the hard limit for those.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class VerifierTimeout(BaseException):
    """A block ran past its time limit; a ``BaseException``, so that the ``except Exception``
    blocks of the code it interrupts cannot swallow it and turn a timeout into an answer."""


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Schedule ``exc_type`` in thread ``thread_id`` (``None`` clears a pending one)."""
    target = ctypes.py_object(exc_type) if exc_type is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`VerifierTimeout` in this thread if the block runs past ``seconds`` (``None``
    or a non-positive value: no limit).

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
