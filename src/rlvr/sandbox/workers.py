"""Helper processes, and the one pool that schedules them.

A helper is a fresh ``python -c`` running a module-level ``main(read_fd, write_fd, *args)``
over a pair of pipes (not ``multiprocessing``: nothing re-imports the caller's ``__main__``,
so scripts without a main guard and notebooks work). The ``Scorer``'s workers
(:meth:`Pool.map`) and bounded calls (:meth:`Pool.take`) both use a :class:`Pool`. A forked
child starts with empty pools (the helpers are its parent's); live pools close at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

START_TIMEOUT_S = 120.0
"""How long a new helper may take to answer its greeting (imports included)."""
_POLL_S = 0.05
DIED, OVERDUE = object(), object()
"""What :meth:`Pool.map` gives for a message whose helper died or ran past the deadline."""


@dataclass(eq=False)
class Helper:
    """The caller's end of one helper process."""

    process: subprocess.Popen
    inbox: Connection  # messages from the helper
    outbox: Connection  # messages for the helper
    own_session: bool
    """Started in its own session: :meth:`kill` takes everything it started with it."""
    state: set[str] = field(default_factory=set)
    """What the pool's user has set up in it (e.g. the modules it imported)."""

    def receive(self, deadline: float) -> Any:
        """The helper's next message; ``TimeoutError`` at ``deadline``, ``EOFError`` if it died.
        Waits in short polls, which :func:`~rlvr.sandbox.bounded.time_limit` can interrupt."""
        while not self.inbox.poll(max(0.0, min(_POLL_S, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise TimeoutError
        try:
            return self.inbox.recv()
        except OSError as exc:
            raise EOFError from exc

    def kill(self) -> None:
        """Kill the helper (and its session, if it has one), reap it, close its pipes."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if self.own_session:
                    os.killpg(self.process.pid, signal.SIGKILL)
                else:
                    self.process.kill()
        self.process.wait()
        self.inbox.close()
        self.outbox.close()


def spawn(main: Callable[..., None], *args: Any, own_session: bool = False) -> Helper:
    """Start ``main(read_fd, write_fd, *args)`` in a fresh interpreter on this ``sys.path``;
    ``main`` must be a module-level function, ``args`` literals (written into the code with repr).
    """
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    call = ", ".join(map(repr, (to_child_r, from_child_w, *args)))
    code = f"from {main.__module__} import {main.__name__}; {main.__name__}({call})"
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=own_session,
        )
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    inbox = Connection(from_child_r, writable=False)
    return Helper(process, inbox, Connection(to_child_w, readable=False), own_session)


def connect(read_fd: int, write_fd: int) -> tuple[Connection, Connection]:
    """Helper side: (inbox, outbox) of its pipes; Ctrl-C is left to the caller to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return Connection(read_fd, writable=False), Connection(write_fd, readable=False)


def serve(inbox: Connection, outbox: Connection, handle: Callable[[Any, Connection], None]) -> None:
    """Helper side: ``handle(message, outbox)`` for each message until ``None`` or end of pipe."""
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        handle(message, outbox)


_LIVE: weakref.WeakSet[Pool] = weakref.WeakSet()


class Pool:
    """Helpers running ``main(read_fd, write_fd, *args)``, started on demand and reused (at most
    ``keep`` idle ones kept); safe to use from several threads. With ``greeting``, each new helper
    is sent it first and must answer ``"ready"`` within :data:`START_TIMEOUT_S`, else
    :meth:`take` raises ``RuntimeError(start_error)``."""

    def __init__(
        self,
        main: Callable[..., None],
        *args: Any,
        own_session: bool = False,
        greeting: Any = None,
        keep: int = 8,
        start_error: str = "",
    ) -> None:
        self.main, self.args, self.own_session = main, args, own_session
        self.greeting, self.keep = greeting, keep
        default_error = f"a helper process running {main.__name__} failed to start"
        self.start_error = start_error or default_error
        self.lock = threading.Lock()
        self.idle: list[Helper] = []
        _LIVE.add(self)

    def take(self) -> Helper:
        """An idle live helper, or a new one."""
        with self.lock:
            while self.idle:
                helper = self.idle.pop()
                if helper.process.poll() is None:
                    return helper
                helper.kill()
        helper = spawn(self.main, *self.args, own_session=self.own_session)
        if self.greeting is not None:
            helper.outbox.send(self.greeting)
            try:
                ready = helper.receive(time.monotonic() + START_TIMEOUT_S) == "ready"
            except (TimeoutError, EOFError):
                ready = False
            if not ready:
                helper.kill()
                raise RuntimeError(self.start_error)
        return helper

    def give_back(self, helper: Helper) -> None:
        """Keep ``helper`` for the next :meth:`take` (or kill it, past ``keep`` idle ones)."""
        with self.lock:
            if len(self.idle) < self.keep:
                self.idle.append(helper)
                return
        helper.kill()

    def map(self, messages: Sequence[Any], size: int, limit_s: float) -> list[Any]:
        """Each message's answer, sent to up to ``size`` helpers at once; a helper that runs
        past ``limit_s`` on one message or dies is killed and replaced, and that message's
        answer is :data:`OVERDUE` or :data:`DIED`."""
        answers: list[Any] = [None] * len(messages)
        pending = deque(range(len(messages)))
        busy: dict[Connection, tuple[Helper, int, float]] = {}
        try:
            while pending or busy:
                while pending and len(busy) < size:
                    helper, index = self.take(), pending.popleft()
                    helper.outbox.send(messages[index])
                    busy[helper.inbox] = (helper, index, time.monotonic() + limit_s)
                self._collect(busy, answers)
        finally:
            for helper, _, _ in busy.values():
                helper.kill()
        return answers

    def _collect(self, busy: dict, answers: list[Any]) -> None:
        """Wait for the first answer or deadline among the busy helpers."""
        wait_s = min(deadline for _, _, deadline in busy.values()) - time.monotonic()
        ready = wait(list(busy), timeout=min(max(wait_s, 0.0), 3600.0))
        now = time.monotonic()
        for conn, (helper, index, deadline) in list(busy.items()):
            if conn in ready:
                try:
                    answers[index] = conn.recv()
                except (EOFError, OSError):
                    answers[index] = DIED
            elif now >= deadline:
                answers[index] = OVERDUE
            else:
                continue
            del busy[conn]
            if answers[index] is DIED or answers[index] is OVERDUE:
                helper.kill()
            else:
                self.give_back(helper)

    def close(self) -> None:
        """Ask the idle helpers to leave, give them two seconds, then kill them."""
        with self.lock:
            helpers, self.idle = self.idle, []
        for helper in helpers:
            with contextlib.suppress(OSError, ValueError):
                helper.outbox.send(None)
        for helper in helpers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                helper.process.wait(timeout=2)
            helper.kill()

    def _forget(self) -> None:
        self.lock = threading.Lock()
        self.idle = []


@atexit.register
def _close_all() -> None:
    for pool in list(_LIVE):
        pool.close()


os.register_at_fork(after_in_child=lambda: [pool._forget() for pool in list(_LIVE)])
