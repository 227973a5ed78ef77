"""One run's lifecycle: working directory, pipes, start, output (stdout and stderr read up to a
shared cap until the child exits or its deadline passes), kill, reap, classification."""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from typing import IO

from rlvr.sandbox.child import EXIT_MEMORY, EXIT_SETUP, EXIT_SYNTAX
from rlvr.sandbox.launch import MARKER_FLAG, ChildConfig, Launcher, child_env, command
from rlvr.sandbox.limits import SandboxLimits, SandboxResult, SandboxStatus

_BY_EXIT_CODE = {
    0: SandboxStatus.OK,
    EXIT_MEMORY: SandboxStatus.MEMORY,
    EXIT_SETUP: SandboxStatus.SANDBOX_ERROR,
    EXIT_SYNTAX: SandboxStatus.SYNTAX_ERROR,
}
_READ_CHUNK = 1 << 16
_MIN_GRANT_S = 0.05


CALLER_MARK = secrets.token_hex(4)
"""How the marker of every run this process starts begins: ``marked_pids(CALLER_MARK)`` finds
its own runs only, not those of another process on the machine (a new interpreter draws its
own; a forked child keeps its parent's)."""


def marked_pids(marker: str = "") -> list[int]:
    """Live processes with an argument starting ``MARKER_FLAG + marker`` (zombies have no
    arguments): those of one run, of one caller (:data:`CALLER_MARK`), or with no ``marker``
    of every run."""
    needle = (MARKER_FLAG + marker).encode()
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc: nothing can be found this way
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{entry.name}/cmdline", "rb") as f:
            if any(arg.startswith(needle) for arg in f.read().split(b"\0")):
                found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> None:
    """SIGKILL every process of the run marked ``marker`` until none is left (a second at most)."""
    deadline = time.monotonic() + 1.0
    while (pids := marked_pids(marker)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def waited_s(marker: str) -> float:
    """Seconds the run marked ``marker`` spent waiting for a CPU held by others (run-queue
    delay, ``/proc/<pid>/task/<tid>/schedstat``): per live process its longest-waiting thread,
    summed over the processes (0 where the kernel does not report it)."""
    total = 0
    for pid in marked_pids(marker):
        longest = 0
        with contextlib.suppress(OSError, ValueError, IndexError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    longest = max(longest, int(f.read().split()[1]))
        total += longest
    return total / 1e9


def _classify(reason: str | None, status: int, cpu_s: float, limits: SandboxLimits):
    """(status, exit code, signal) of a run that ended with wait ``status``."""
    if os.WIFSIGNALED(status):
        exit_code, sig = None, os.WTERMSIG(status)
    else:
        exit_code, sig = os.WEXITSTATUS(status), None
    if reason is not None:
        verdict = SandboxStatus.OUTPUT_LIMIT if reason == "output" else SandboxStatus.TIMEOUT
    elif sig is not None:
        cpu_hit = cpu_s >= max(1, math.ceil(limits.cpu_time_s)) - 0.05
        timeout = sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_hit)
        verdict = SandboxStatus.TIMEOUT if timeout else SandboxStatus.KILLED
    else:
        verdict = _BY_EXIT_CODE.get(exit_code, SandboxStatus.ERROR)
    return verdict, exit_code, sig


def _temp_file(data: str, directory: str | None = None) -> IO[bytes]:
    f = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - the caller closes it
    f.write(data.encode("utf-8"))
    f.seek(0)
    return f


def _remove_tree(path: str) -> None:
    if os.geteuid() != 0:  # the program may have left directories without write permission
        for root, dirs, _ in os.walk(path):
            for d in dirs:
                full = os.path.join(root, d)
                if not os.path.islink(full):
                    with contextlib.suppress(OSError):
                        os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def sandbox_error(message: str, started: float) -> SandboxResult:
    """The result of a run the sandbox could not start."""
    wall_s = time.monotonic() - started
    return SandboxResult(SandboxStatus.SANDBOX_ERROR, None, None, "", message, False, wall_s, 0.0)


def _spawn(launcher: Launcher, cfg: ChildConfig, stdio: tuple[int, int, int], marker: str) -> int:
    """Start the bootstrap in its own session; returns its pid. The working directory and the
    stdio go to the uid the program runs as, if not the caller's: owning its stdio lets it
    reopen /dev/stdin, /dev/stdout, /dev/stderr."""
    ids = launcher.run_as
    owner = ids or ((cfg.uid, cfg.gid) if cfg.uid is not None and cfg.gid is not None else None)
    if owner is not None:
        os.chown(cfg.workdir, *owner)
        for fd in stdio:
            os.fchown(fd, *owner)
    proc = subprocess.Popen(
        command(launcher, cfg, marker),
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        pass_fds=cfg.fds(),
        cwd=cfg.workdir,
        env=child_env(cfg.workdir, launcher.runtime),
        start_new_session=True,
        user=None if ids is None else ids[0],
        group=None if ids is None else ids[1],
        extra_groups=None if ids is None else [],
    )
    proc.returncode = 0  # reaped by _finish with os.wait4, not by Popen
    return proc.pid


def execute(
    source: str,
    stdin: str,
    limits: SandboxLimits,
    cfg: ChildConfig,
    launcher: Launcher,
    driver: str | None = None,
) -> SandboxResult:
    """Run one child with ``cfg`` (its message minus descriptors and directory) and collect it."""
    started = time.monotonic()
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="rlvr-sandbox-"))
    try:
        # stdin lives unnamed in the working directory, so /dev/stdin reopens under Landlock
        with contextlib.ExitStack() as files:
            code_f = files.enter_context(_temp_file(source))
            stdin_f = files.enter_context(_temp_file(stdin, workdir))
            cfg = replace(cfg, code_fd=code_f.fileno(), workdir=workdir)
            if driver is not None:
                cfg = replace(cfg, driver_fd=files.enter_context(_temp_file(driver)).fileno())
            return _launch(launcher, cfg, stdin_f.fileno(), limits, started)
    finally:
        _remove_tree(workdir)


def _launch(
    launcher: Launcher, cfg: ChildConfig, stdin_fd: int, limits: SandboxLimits, started: float
) -> SandboxResult:
    marker = CALLER_MARK + secrets.token_hex(8)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    report_r, report_w = os.pipe()
    verdict_r, verdict_w = os.pipe() if cfg.driver_fd is not None else (None, None)
    try:
        try:
            cfg = replace(cfg, report_fd=report_w, verdict_fd=verdict_w)
            pid = _spawn(launcher, cfg, (stdin_fd, out_w, err_w), marker)
        except OSError as exc:
            python = launcher.runtime.python
            return sandbox_error(
                f"could not start the sandboxed program with {python}: {exc}", started
            )
        finally:
            for fd in (out_w, err_w, report_w, verdict_w):  # the child holds its own copies
                if fd is not None:
                    os.close(fd)
        return _finish(pid, (out_r, err_r, report_r, verdict_r), marker, limits, started)
    finally:
        for fd in (out_r, err_r, report_r, verdict_r):
            if fd is not None:
                os.close(fd)


def _finish(
    pid: int,
    fds: tuple[int, int, int, int | None],
    marker: str,
    limits: SandboxLimits,
    started: float,
) -> SandboxResult:
    stdout_fd, stderr_fd, report_fd, verdict_fd = fds
    out = Output(limits.output_bytes)
    wall = limits.wall_time_s
    # Time spent waiting for a CPU held by others (a concurrent run's busy threads) does not
    # count against the wall-clock limit, up to the limit again (docs/sandbox.md).
    waited = lambda: min(waited_s(marker), wall)  # noqa: E731
    try:
        reason = collect(pid, stdout_fd, stderr_fd, started + wall, out, waited)
    finally:  # kill the group and any marked escapee, then reap the child
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        kill_marked(marker)
        _, status, usage = os.wait4(pid, 0)
    cpu_s = usage.ru_utime + usage.ru_stime
    # The bootstrap's report: b"1" once it started, b"2" once the program starts, then, under
    # bubblewrap, the supervisor's wait status and CPU microseconds of the program (bubblewrap
    # reports neither faithfully).
    report = read_available(report_fd, 64)
    bootstrapped = report[:1] == b"1"
    ran = report[1:2] == b"2" and len(report) in (2, 14)
    supervisor = report[2:] if ran else report[1:]
    if len(supervisor) == 12:
        status = int.from_bytes(supervisor[:4], "little")
        cpu_s = int.from_bytes(supervisor[4:], "little") / 1e6
    verdict, exit_code, sig = _classify(reason, status, cpu_s, limits)
    if not bootstrapped and reason is None:  # the bootstrap never ran: the sandbox failed
        verdict = SandboxStatus.SANDBOX_ERROR
    elif ran and verdict is SandboxStatus.SANDBOX_ERROR:  # the program left with EXIT_SETUP
        verdict = SandboxStatus.ERROR
    return SandboxResult(
        status=verdict,
        exit_code=exit_code,
        signal=sig,
        stdout=out.text(True),
        stderr=out.text(False),
        output_truncated=out.over,
        wall_time_s=time.monotonic() - started,
        cpu_time_s=cpu_s,
        report=read_available(verdict_fd).decode("utf-8", errors="replace"),
    )


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


def _granted(deadline: float, grace: Callable[[], float]) -> tuple[float, float]:
    """(limit, seconds left) once ``deadline`` has passed: ``deadline + grace()``, or no time
    left when that is under 50 ms away (so that small grants do not follow one another)."""
    limit = deadline + grace()
    remaining = limit - time.monotonic()
    return limit, remaining if remaining >= _MIN_GRANT_S else 0.0


def collect(
    pid: int,
    stdout_fd: int,
    stderr_fd: int,
    deadline: float,
    out: Output,
    grace: Callable[[], float] = lambda: 0.0,
) -> str | None:
    """Read output until the child exits; returns 'timeout', 'output' or None. Past
    ``deadline``, ``grace()`` more seconds are granted, asked again as each grant ends."""
    with selectors.DefaultSelector() as sel, contextlib.ExitStack() as held:
        for fd, is_stdout in ((stdout_fd, True), (stderr_fd, False)):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, is_stdout)
        if (pidfd := _pidfd(pid)) is not None:
            held.callback(os.close, pidfd)
            sel.register(pidfd, selectors.EVENT_READ, None)
        exited, limit = False, deadline
        while not exited:
            if (remaining := limit - time.monotonic()) <= 0:
                limit, remaining = _granted(deadline, grace)
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
        _drain(sel, out)
        return "output" if out.over else None


def _drain(sel: selectors.BaseSelector, out: Output) -> None:
    """Read what is already buffered in the registered pipes, without waiting."""
    for key in list(sel.get_map().values()):
        while key.data is not None and not out.over and out.read(key.fd, key.data):
            pass


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
