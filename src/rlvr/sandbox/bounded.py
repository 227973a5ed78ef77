"""Calling a function under a hard time and memory limit, from any thread.

:func:`call_bounded` runs a module-level function in a helper process and waits for its
result until a deadline. The helper has an address-space limit (``RLIMIT_AS``) and, for
each call, a CPU-time limit (``RLIMIT_CPU``) a second past the deadline; a call that runs
past its deadline, runs out of memory or kills its helper raises :class:`LimitExceeded`,
and the helper is killed and replaced on the next call. Unlike ``signal.alarm`` (main
thread only) or an asynchronous exception (:mod:`rlvr.sandbox.timeout`, which waits for a
long C call such as a huge integer power to return), this cuts off anything, on any
thread, and bounds memory too.

Helpers are plain interpreters (:mod:`rlvr.sandbox.workers`) started on first use, kept idle
between calls and reused: the call costs a round trip through a
pipe. Importing the function's module happens before the clock starts. Helpers stay in the
caller's process group (ignoring Ctrl-C), so killing a scorer worker's group takes its
helpers with it; an idle helper leaves when its pipe closes, and the CPU limit ends one whose
caller died in the middle of a call.

>>> call_bounded(divmod, 17, 5)
(3, 2)
>>> call_bounded(pow, 9, 9**9, timeout_s=0.5)   # 370 million digits: cut off
Traceback (most recent call last):
...
rlvr.sandbox.bounded.LimitExceeded: pow ran past 0.5 s
"""

from __future__ import annotations

import atexit
import math
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from rlvr.sandbox.workers import Helper, connect, serve, spawn

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 1024
_START_TIMEOUT_S = 120.0
_POLL_S = 0.05
_MAX_IDLE = 8
_MEMORY = "MemoryError"


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


@dataclass(eq=False)
class _Helper:
    link: Helper
    memory_mb: int
    modules: set[str] = field(default_factory=set)
    """Modules already imported in the helper."""


def _spawn(memory_mb: int) -> _Helper:
    return _Helper(spawn(_helper_main, memory_mb), memory_mb)


def _kill(helper: _Helper) -> None:
    helper.link.kill()


class _Pool:
    """Idle helpers of this process (a forked child starts with none)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Helper] = []

    def take(self, memory_mb: int) -> _Helper:
        with self.lock:
            while self.idle:
                helper = self.idle.pop()
                if helper.memory_mb == memory_mb and helper.link.process.poll() is None:
                    return helper
                _kill(helper)
        return _spawn(memory_mb)

    def give_back(self, helper: _Helper) -> None:
        with self.lock:
            if len(self.idle) < _MAX_IDLE:
                self.idle.append(helper)
                return
        _kill(helper)

    def close(self) -> None:
        with self.lock:
            helpers, self.idle = self.idle, []
        for helper in helpers:
            _kill(helper)

    def forget(self) -> None:
        """In a forked child: the helpers belong to the parent; drop them without killing."""
        self.lock = threading.Lock()
        self.idle = []


_POOL = _Pool()
atexit.register(_POOL.close)
os.register_at_fork(after_in_child=_POOL.forget)


def _wait(helper: _Helper, deadline: float, what: str) -> tuple[bool, Any]:
    """The helper's answer, or :class:`LimitExceeded` once ``deadline`` passes."""
    while not helper.link.inbox.poll(max(0.0, min(_POLL_S, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            raise LimitExceeded(what)
    try:
        return helper.link.inbox.recv()
    except (EOFError, OSError) as exc:
        raise LimitExceeded(f"{what}: the helper process died (memory or CPU limit)") from exc


def _prepare(helper: _Helper, module: str) -> None:
    if module not in helper.modules:
        helper.link.outbox.send(("import", module))
        ok, error = _wait(helper, time.monotonic() + _START_TIMEOUT_S, f"importing {module}")
        if not ok:
            raise RuntimeError(f"the helper process could not import {module}: {error}")
        helper.modules.add(module)


def call_bounded(
    fn: Callable[..., Any],
    *args: Any,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> Any:
    """``fn(*args)`` in a helper process, cut off after ``timeout_s`` or ``memory_mb`` MiB.

    ``fn`` must be importable by module path and its arguments and result picklable. Raises
    :class:`LimitExceeded` when a limit is hit, ``RuntimeError`` with the message of any
    other exception ``fn`` raised.
    """
    if not timeout_s > 0 or memory_mb <= 0:
        raise ValueError(f"timeout_s and memory_mb must be positive, got {timeout_s}, {memory_mb}")
    helper = _POOL.take(memory_mb)
    try:
        _prepare(helper, fn.__module__)
        helper.link.outbox.send(("call", fn, args, timeout_s + 1.0))
        ok, value = _wait(
            helper, time.monotonic() + timeout_s, f"{fn.__name__} ran past {timeout_s:g} s"
        )
    except BaseException:  # LimitExceeded, a broken pipe, or the caller's own time limit
        _kill(helper)
        raise
    if not ok and value == _MEMORY:
        _kill(helper)
        raise LimitExceeded(f"{fn.__name__} ran out of memory ({memory_mb} MiB)")
    _POOL.give_back(helper)
    if not ok:
        raise RuntimeError(value)
    return value
