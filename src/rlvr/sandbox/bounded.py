"""Limits on trusted code that hold on any thread: :func:`call_bounded` and :func:`time_limit`.

:func:`call_bounded` runs a module-level function in a helper process (a
:class:`~rlvr.sandbox.workers.Pool` per memory limit) with ``RLIMIT_AS`` and, per call,
``RLIMIT_CPU`` a second past the deadline; a call past its deadline or out of memory raises
:class:`LimitExceeded` and its helper is killed. Unlike ``signal.alarm`` (main thread only) or
:func:`time_limit`, this cuts off anything. Importing the function's module happens before the
clock starts. Helpers stay in the caller's process group (ignoring Ctrl-C), so killing a scorer
worker's group takes them with it; the CPU limit ends one whose caller died mid-call.

:func:`time_limit` has a watchdog timer raise :class:`VerifierTimeout` inside the thread running
the block (``PyThreadState_SetAsyncExc``): it works off the main thread and leaves signal
handlers alone, but like a signal it arrives between bytecodes, so one long C call (a huge
integer power) runs to its end first.

>>> call_bounded(divmod, 17, 5)
(3, 2)
>>> call_bounded(pow, 9, 9**9, timeout_s=0.5)   # 370 million digits: cut off
Traceback (most recent call last):
...
rlvr.sandbox.bounded.LimitExceeded: pow ran past 0.5 s
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from rlvr.sandbox.workers import START_TIMEOUT_S, Helper, Pool, connect, serve

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
_MEMORY = "MemoryError"
_POOLS: dict[int, Pool] = {}  # memory limit in MiB -> the pool of helpers with that limit
_POOLS_LOCK = threading.Lock()


class LimitExceeded(Exception):
    """A bounded call ran past its time limit or its memory limit."""


def _helper_main(read_fd: int, write_fd: int, memory_mb: int) -> None:
    """Helper process: import modules and run calls until the pipe closes."""
    inbox, outbox = connect(read_fd, write_fd)
    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    serve(inbox, outbox, _answer)


def _answer(message: tuple, outbox: Connection) -> None:
    if message[0] == "import":
        try:
            __import__(message[1])
        except Exception as err:
            outbox.send((False, f"{type(err).__name__}: {err}"))
        else:
            outbox.send((True, None))
        return
    _, fn, args, cpu_s = message
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spent = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(spent + cpu_s), hard))
    try:
        outbox.send((True, fn(*args)))
    except MemoryError:
        outbox.send((False, _MEMORY))
        os._exit(0)  # the heap may be in a bad state: the next call gets a fresh helper
    except Exception as err:
        outbox.send((False, f"{type(err).__name__}: {err}"))


def _pool(memory_mb: int) -> Pool:
    with _POOLS_LOCK:
        if memory_mb not in _POOLS:
            _POOLS[memory_mb] = Pool(_helper_main, memory_mb)
        return _POOLS[memory_mb]


def _ask(helper: Helper, message: tuple, timeout_s: float, what: str) -> tuple[bool, Any]:
    """Send ``message``; its answer, or :class:`LimitExceeded` after ``timeout_s``."""
    helper.outbox.send(message)
    try:
        return helper.receive(time.monotonic() + timeout_s)
    except TimeoutError:
        raise LimitExceeded(what) from None
    except EOFError as exc:
        raise LimitExceeded(f"{what}: the helper process died (memory or CPU limit)") from exc


def call_bounded(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> Any:
    """``fn(*args)`` in a helper process, cut off after ``timeout_s`` or ``memory_mb`` MiB; ``fn``
    must be importable by module path, its arguments and result picklable. Raises
    :class:`LimitExceeded` when a limit is hit, ``RuntimeError`` with the message of any other
    exception ``fn`` raised."""
    if not timeout_s > 0 or memory_mb <= 0:
        raise ValueError(f"timeout_s and memory_mb must be positive, got {timeout_s}, {memory_mb}")
    pool = _pool(memory_mb)
    helper, module = pool.take(), fn.__module__
    try:
        if module not in helper.state:
            ok, error = _ask(helper, ("import", module), START_TIMEOUT_S, f"importing {module}")
            if not ok:
                raise RuntimeError(f"the helper process could not import {module}: {error}")
            helper.state.add(module)
        what = f"{fn.__name__} ran past {timeout_s:g} s"
        ok, value = _ask(helper, ("call", fn, args, timeout_s + 1.0), timeout_s, what)
    except BaseException:  # LimitExceeded, a broken pipe, or the caller's own time limit
        helper.kill()
        raise
    if not ok and value == _MEMORY:
        helper.kill()
        raise LimitExceeded(f"{fn.__name__} ran out of memory ({memory_mb} MiB)")
    pool.give_back(helper)
    if not ok:
        raise RuntimeError(value)
    return value


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
