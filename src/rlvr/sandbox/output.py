"""Reading a run's stdout and stderr up to a shared cap until it exits or its deadline passes."""

from __future__ import annotations

import contextlib
import os
import selectors
import time

_READ_CHUNK = 1 << 16


class Output:
    """stdout/stderr collected up to a shared byte cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self.data = {True: bytearray(), False: bytearray()}  # is_stdout -> bytes

    @property
    def over(self) -> bool:
        return self.total > self.cap

    def text(self, is_stdout: bool) -> str:
        return self.data[is_stdout].decode("utf-8", errors="replace")

    def read(self, fd: int, is_stdout: bool) -> bytes | None:
        """Read what is available from ``fd``: None if nothing is, ``b""`` at end of file."""
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return None
        self.data[is_stdout] += chunk[: max(self.cap - self.total, 0)]
        self.total += len(chunk)
        return chunk


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # kernels before 5.3: the loop polls instead
        return None


def collect(pid: int, stdout_fd: int, stderr_fd: int, deadline: float, out: Output) -> str | None:
    """Read output until the child exits; returns 'timeout', 'output' or None."""
    pidfd = _pidfd(pid)
    with selectors.DefaultSelector() as sel:
        for fd, is_stdout in ((stdout_fd, True), (stderr_fd, False)):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, is_stdout)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, None)
        try:
            return _collect_loop(pid, pidfd, sel, deadline, out)
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _collect_loop(
    pid: int, pidfd: int | None, sel: selectors.BaseSelector, deadline: float, out: Output
) -> str | None:
    exited = False
    while not exited:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        for key, _ in sel.select(remaining if pidfd is not None else min(remaining, 0.02)):
            if key.data is None:
                exited = True
            elif out.read(key.fd, key.data) == b"":
                sel.unregister(key.fd)
            if out.over:
                return "output"
        if pidfd is None and not exited:
            exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    for key in list(sel.get_map().values()):  # what is already buffered, without waiting
        while key.data is not None and not out.over and out.read(key.fd, key.data):
            pass
    return "output" if out.over else None


def read_available(fd: int | None, limit: int = _READ_CHUNK) -> bytes:
    """What a finished run left in a pipe, up to ``limit`` bytes."""
    data = b""
    if fd is None:
        return data
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError):
        while len(data) < limit and (chunk := os.read(fd, limit)):
            data += chunk
    return data[:limit]
