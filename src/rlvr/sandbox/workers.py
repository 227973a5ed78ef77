"""Helper processes: a fresh interpreter running a module-level loop over a pair of pipes.

The one primitive behind the scorer's worker processes (:mod:`rlvr.rewards.scoring`) and the
helpers of bounded calls (:mod:`rlvr.sandbox.bounded`). A helper is a plain
``python -c`` started with :func:`spawn` (not ``multiprocessing``: nothing re-imports the
caller's ``__main__``, so scripts without a main guard and notebooks work); its side runs
:func:`serve`, answering each message until it receives ``None`` or its pipe closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(eq=False)
class Helper:
    """The caller's end of one helper process."""

    process: subprocess.Popen
    inbox: Connection
    """Messages from the helper."""
    outbox: Connection
    """Messages for the helper."""
    own_session: bool
    """Started in its own session: :meth:`kill` takes everything it started with it."""

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
    """Start ``main(read_fd, write_fd, *args)`` in a fresh interpreter on this ``sys.path``.

    ``main`` must be a module-level function and ``args`` literals (they are written into the
    command line with ``repr``).
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
