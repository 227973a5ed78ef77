"""Run untrusted Python in a child process with resource limits and layered isolation.

:func:`run_untrusted` starts ``python -I -S`` on a program in a fresh working directory and
returns a :class:`SandboxResult`. :func:`isolation_mode` names the isolation in use, one of
:data:`ISOLATION_MODES`:

``bwrap``
  the program runs inside bubblewrap (``bwrap``, when installed and working): its own user,
  PID, IPC, UTS and network namespaces, a filesystem holding only read-only binds of the
  interpreter, its standard library and the system's shared libraries, plus the working
  directory, a tmpfs of ``limits.disk_bytes``; started as root, bubblewrap itself runs as the
  unprivileged ``policy.user``.
``fallback-landlock``
  no bubblewrap: the layers below, with Landlock limiting file access to reading the
  interpreter's files and to the working directory (and, on newer kernels, refusing TCP,
  abstract Unix sockets and signals to processes outside the run).
``fallback-uid``
  no bubblewrap, no Landlock, started as root: the program runs as ``policy.user``, so it
  reads only what that user may read.
``fallback-minimal``
  none of these: the program can read whatever the caller can.

In every mode (kernel-enforced wherever the child starts at all): own session and process
group; a wall-clock limit after which the group is SIGKILLed and reaped; ``RLIMIT_CPU``,
``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, no core files; an output cap; a throw-away
working directory deleted afterwards; an empty environment apart from ``PATH``,
``HOME``/``TMPDIR`` (the working directory) and a UTF-8 locale; isolated mode (no
site-packages, no ``PYTHON*`` variables). Without bubblewrap, where the machine allows (see
:func:`isolation_report`): death with the caller; network and PID namespaces; a user
namespace when not root; when started as root, a drop to ``policy.user`` with no capability
kept (an interpreter that user cannot read is replaced by a readable copy, see
:mod:`rlvr.sandbox.interpreter`) and ``RLIMIT_NPROC``. Best effort in every mode: an audit hook
inside the child (a tripwire for fork/exec, sockets, ctypes, signals and writes outside the
working directory) and a ``/proc`` scan for processes carrying the run's marker. Not
provided: seccomp filters, cgroup accounting, disk quotas outside bubblewrap. ``docs/sandbox.md`` has the threat
model and what each mode guarantees.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
import logging
import marshal
import math
import os
import pwd
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import IO

# Exit statuses reserved by the child bootstrap; a program that exits with one of them on
# purpose is classified accordingly.
from rlvr.sandbox.child import EXIT_MEMORY, EXIT_SETUP, EXIT_SYNTAX
from rlvr.sandbox.interpreter import (
    SYSTEM_PATHS,
    Runtime,
    describe,
    readable_copy,
    runtime_readable_by_others,
)

MARKER_FLAG = "--rlvr-sandbox="
"""Prefix of the argument that marks every sandboxed process (and its forks) in /proc."""
ISOLATION_MODES = ("bwrap", "fallback-landlock", "fallback-uid", "fallback-minimal")
"""Values of :func:`isolation_mode`, strongest first (``unavailable`` when nothing runs)."""

_READ_CHUNK = 1 << 16
_DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero", "/dev/full")
_PACKAGE_DIRS = ("site-packages", "dist-packages")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run."""

    wall_time_s: float = 10.0
    """Wall-clock limit; past it the process group is killed and the status is ``timeout``."""
    cpu_time_s: float = 10.0
    """CPU-time limit (RLIMIT_CPU, rounded up to whole seconds; SIGKILL one second later)."""
    memory_mb: int = 1024
    """Address-space limit in MiB (RLIMIT_AS: virtual memory, so leave headroom over RSS)."""
    output_bytes: int = 1 << 20
    """Cap on stdout plus stderr; past it the run is killed and the status is ``output_limit``."""
    file_bytes: int = 16 << 20
    """Largest file the program may write (RLIMIT_FSIZE)."""
    disk_bytes: int = 64 << 20
    """All the files in the working directory together; enforced only under bubblewrap, where
    the working directory is a tmpfs of this size (in memory); the fallback modes have no cap."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    processes: int = 256
    """Tasks of the sandbox uid (RLIMIT_NPROC, threads included); applied only after a uid drop."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if not getattr(self, f.name) > 0:
                raise ValueError(
                    f"SandboxLimits.{f.name} must be positive, got {getattr(self, f.name)!r}"
                )


@dataclass(frozen=True)
class SandboxPolicy:
    """Which isolation layers to ask for; each is used only where the probe found it working."""

    namespaces: bool = True
    """Network and PID namespaces (and a user namespace when not root) where the kernel allows."""
    drop_privileges: bool = True
    """When running as root, run the program as ``user`` instead."""
    user: str = "nobody"
    """Account whose uid and gid the program gets after a privilege drop."""
    audit_hook: bool = True
    """Install the in-interpreter audit hook (tripwire for fork/exec, sockets, ctypes, writes)."""
    python: str = ""
    """Interpreter that runs the program; empty means this process's (``sys.executable``)."""
    bubblewrap: bool = True
    """Run the program inside bubblewrap when it is installed and works (needs ``namespaces``)."""
    landlock: bool = True
    """Without bubblewrap, limit the program's file access with Landlock where the kernel has it."""


class SandboxError(RuntimeError):
    """The sandbox could not run a program (as opposed to the program failing)."""


class SandboxStatus(str, enum.Enum):
    """How a sandboxed run ended."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    SYNTAX_ERROR = "syntax_error"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run."""

    status: SandboxStatus
    """``ok`` (exit 0), ``error`` (other exit status), ``syntax_error`` (did not compile),
    ``timeout`` (wall or CPU limit), ``memory`` (MemoryError), ``output_limit``, ``killed``
    (another signal) or ``sandbox_error`` (the sandbox itself failed to start)."""
    exit_code: int | None
    """Exit status, or None when the process died from a signal."""
    signal: int | None
    """Signal that ended the process, or None."""
    stdout: str
    """Standard output, decoded as UTF-8 (invalid bytes replaced), cut at the output cap."""
    stderr: str
    """Standard error, same treatment."""
    output_truncated: bool
    """True when output past the cap was dropped."""
    wall_time_s: float
    """Seconds from start to reaping, as seen by the caller."""
    cpu_time_s: float
    """User plus system CPU seconds of the child and its reaped descendants."""
    report: str = ""
    """Lines the run's test driver reported (see ``driver`` of :func:`run_untrusted`)."""

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0 within every limit."""
        return self.status is SandboxStatus.OK


@dataclass(frozen=True)
class IsolationReport:
    """Which layers runs under one policy get on this machine (from :func:`isolation_report`)."""

    mode: str
    """One of :data:`ISOLATION_MODES`, or ``unavailable`` when the interpreter cannot run."""
    bubblewrap: bool
    """The program runs inside bubblewrap."""
    network_namespace: bool
    """Own network namespace: no interfaces but a down loopback."""
    pid_namespace: bool
    """Own PID namespace: the program's processes die with it."""
    user_namespace: bool
    """Own user namespace (bubblewrap's, or ours when not root, to be allowed the other two)."""
    uid_drop: bool
    """The program runs as the policy's unprivileged user, with no capability."""
    landlock: bool
    """Landlock limits file access to reading the interpreter's files and the working directory."""
    process_limit: bool
    """RLIMIT_NPROC is in force (it needs a dedicated non-root uid)."""
    audit_hook: bool
    """The in-interpreter audit hook is installed."""
    parent_death_signal: bool
    """The run is SIGKILLed if the calling process dies."""
    python: str = ""
    """The interpreter that runs programs."""
    isolated_interpreter: bool = True
    """``python -I -S``: no site-packages, environment variables or user site."""
    notes: tuple[str, ...] = ()
    """Why a requested layer is missing, one line per layer."""

    def active(self) -> tuple[str, ...]:
        """Names of the layers in force."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is True)


@dataclass(frozen=True)
class _Launcher:
    """How the bootstrap of a run is started."""

    runtime: Runtime
    """Interpreter that runs the bootstrap and the program."""
    bwrap: str | None = None
    """Path of bubblewrap, or None to start the interpreter directly."""
    run_as: tuple[int, int] | None = None
    """uid/gid that bubblewrap is started as (root handing the run to an unprivileged user)."""
    inner_ids: tuple[int, int] | None = None
    """uid/gid inside bubblewrap's user namespace when bubblewrap itself stays root."""


@dataclass(frozen=True)
class ChildConfig:
    """What the bootstrap of one run is told: the one message from the parent to the child,
    sent as a ``marshal`` dump of its fields (the child reads them as attributes)."""

    probe: bool
    """Try every layer, record failures instead of stopping, print what worked, run nothing."""
    user_namespace: bool
    network_namespace: bool
    pid_namespace: bool
    uid: int | None
    """uid/gid to drop to (root only), or None."""
    gid: int | None
    rlimits: dict[str, list[int]]
    """``RLIMIT_*`` name -> [soft, hard]."""
    audit_hook: bool
    parent_death_signal: bool
    parent: int
    """pid of the caller (the parent-death signal checks it is still there)."""
    landlock_read: tuple[str, ...] | None
    """Paths Landlock lets the program read; None: no Landlock."""
    unset_env: tuple[str, ...]
    """Variables removed before the program runs (the interpreter's own)."""
    supervise: bool
    """Under bubblewrap: fork a supervisor that reports the program's status and CPU time."""
    nproc: int | None
    """``RLIMIT_NPROC``, or None when it cannot apply (no dedicated uid)."""
    disk_bytes: int
    """Read by the parent only: the size of bubblewrap's tmpfs."""
    workdir: str = ""
    """The run's working directory, the only writable place."""
    code_fd: int = -1
    """Descriptor of the program's source."""
    report_fd: int = -1
    """Descriptor the bootstrap reports on (started; the supervisor's status)."""
    driver_fd: int | None = None
    """Descriptor of the test driver's source (see :func:`run_untrusted`), or None."""
    verdict_fd: int | None = None
    """Descriptor the driver reports on."""

    def message(self) -> str:
        """The hex ``marshal`` dump the child's command line carries."""
        return marshal.dumps({f.name: getattr(self, f.name) for f in fields(self)}).hex()

    def fds(self) -> tuple[int, ...]:
        """The descriptors the child inherits."""
        held = (self.code_fd, self.report_fd, self.driver_fd, self.verdict_fd)
        return tuple(fd for fd in held if fd is not None)


@functools.cache
def _child_source() -> str:
    """The bootstrap, preceded by the plain-data codec its test driver channel uses."""
    here = Path(__file__).parent
    parts = [(here / name).read_text(encoding="utf-8") for name in ("plain.py", "child.py")]
    return "\n".join(parts)


def _rlimits(limits: SandboxLimits) -> dict[str, list[int]]:
    cpu = max(1, math.ceil(limits.cpu_time_s))
    memory = limits.memory_mb << 20
    return {
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_AS": [memory, memory],
        "RLIMIT_FSIZE": [limits.file_bytes, limits.file_bytes],
        "RLIMIT_NOFILE": [limits.open_files, limits.open_files],
    }


def _user_ids(policy: SandboxPolicy, notes: list[str]) -> tuple[int, int] | None:
    """uid/gid to drop to, or None when no drop is asked for or possible (with a note why)."""
    if not policy.drop_privileges:
        notes.append("uid_drop: disabled by policy")
    elif os.geteuid() != 0:
        notes.append("uid_drop: not running as root")
    else:
        try:
            entry = pwd.getpwnam(policy.user)
        except KeyError:
            notes.append(f"uid_drop: no user {policy.user!r}")
        else:
            return entry.pw_uid, entry.pw_gid
    return None


def _child_env(workdir: str, runtime: Runtime) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        **runtime.env,
    }


class _Output:
    """stdout/stderr collected up to a shared byte cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self.data = {True: bytearray(), False: bytearray()}  # is_stdout -> bytes

    @property
    def over(self) -> bool:
        return self.total > self.cap

    def add(self, is_stdout: bool, chunk: bytes) -> None:
        room = max(self.cap - self.total, 0)
        self.data[is_stdout] += chunk[:room]
        self.total += len(chunk)


def _read_some(fd: int, is_stdout: bool, out: _Output) -> bool:
    """Read what is available; False at end of file."""
    try:
        chunk = os.read(fd, _READ_CHUNK)
    except BlockingIOError:
        return True
    if chunk:
        out.add(is_stdout, chunk)
    return bool(chunk)


def _drain(sel: selectors.BaseSelector, out: _Output) -> None:
    """Read everything already buffered in the pipes without waiting for end of file."""
    for key in list(sel.get_map().values()):
        if key.data is None:
            continue
        while not out.over:
            try:
                chunk = os.read(key.fd, _READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                break
            out.add(key.data, chunk)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(pid: int) -> bool:
    flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
    return os.waitid(os.P_PID, pid, flags) is not None


def _collect(pid: int, stdout_fd: int, stderr_fd: int, deadline: float, out: _Output) -> str | None:
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
    pid: int, pidfd: int | None, sel: selectors.BaseSelector, deadline: float, out: _Output
) -> str | None:
    exited = False
    while not exited:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        tick = remaining if pidfd is not None else min(remaining, 0.02)
        for key, _ in sel.select(tick):
            if key.data is None:
                exited = True
            elif not _read_some(key.fd, key.data, out):
                sel.unregister(key.fd)
            if out.over:
                return "output"
        exited = exited or (pidfd is None and _has_exited(pid))
    _drain(sel, out)
    return "output" if out.over else None


def marked_pids(marker: str) -> list[int]:
    """Live processes with the argument ``MARKER_FLAG + marker`` (zombies have no arguments)."""
    needle = (MARKER_FLAG + marker).encode()
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc: nothing can be found this way
        return found
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_marked(marker: str, *, patience_s: float = 1.0) -> int:
    """SIGKILL every process of the run marked ``marker`` until none is left; returns how many."""
    killed: set[int] = set()
    deadline = time.monotonic() + patience_s
    while (pids := marked_pids(marker)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.002)
    return len(killed)


def _kill_and_reap(pid: int, marker: str) -> tuple[int, float]:
    """Kill the group and any marked escapee, reap the child; returns (wait status, CPU s)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    kill_marked(marker)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime


def _classify(
    reason: str | None, exit_code: int | None, sig: int | None, cpu_s: float, limits: SandboxLimits
) -> SandboxStatus:
    if reason == "output":
        return SandboxStatus.OUTPUT_LIMIT
    if reason == "timeout":
        return SandboxStatus.TIMEOUT
    if sig is not None:
        cpu_hit = cpu_s >= max(1, math.ceil(limits.cpu_time_s)) - 0.05
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_hit):
            return SandboxStatus.TIMEOUT
        return SandboxStatus.KILLED
    by_code = {
        0: SandboxStatus.OK,
        EXIT_MEMORY: SandboxStatus.MEMORY,
        EXIT_SETUP: SandboxStatus.SANDBOX_ERROR,
        EXIT_SYNTAX: SandboxStatus.SYNTAX_ERROR,
    }
    return by_code.get(exit_code, SandboxStatus.ERROR)


def _exit_of(status: int) -> tuple[int | None, int | None]:
    """(exit code, signal) of a wait status."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


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


def _sandbox_error(message: str, started: float) -> SandboxResult:
    return SandboxResult(
        SandboxStatus.SANDBOX_ERROR, None, None, "", message, False, time.monotonic() - started, 0.0
    )


def _bwrap_argv(launcher: _Launcher, workdir: str, disk_bytes: int) -> list[str]:
    """bubblewrap's options: fresh namespaces, the interpreter's files read-only, the workdir
    the only writable place: a tmpfs of ``disk_bytes`` at the host directory's path."""
    assert launcher.bwrap is not None
    argv = [launcher.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
    argv += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if launcher.inner_ids is not None:
        argv += ["--uid", str(launcher.inner_ids[0]), "--gid", str(launcher.inner_ids[1])]
    elif launcher.run_as is None and os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    hidden = []
    for path in launcher.runtime.read_paths:
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib
            argv += ["--symlink", os.readlink(path), path]
            continue
        argv += ["--ro-bind", path, path]
        if path not in SYSTEM_PATHS:  # the standard library without installed packages
            hidden += [os.path.join(path, d) for d in _PACKAGE_DIRS]
    for path in filter(os.path.isdir, hidden):
        argv += ["--tmpfs", path, "--remount-ro", path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(disk_bytes), "--perms", "0700"]
    argv += ["--tmpfs", workdir, "--chdir", workdir]
    # Nothing but the working directory is writable: not the root tmpfs, not /dev (or /dev/shm).
    return [*argv, "--remount-ro", "/dev", "--remount-ro", "/", "--"]


def _spawn(
    launcher: _Launcher,
    cfg: ChildConfig,
    stdin_fd: int,
    stdout_fd: int,
    stderr_fd: int,
    marker: str,
) -> int:
    """Start the bootstrap in its own session; returns its pid."""
    python = [launcher.runtime.python, "-I", "-S", "-X", "utf8", "-c", _child_source()]
    python += [MARKER_FLAG + marker, cfg.message()]
    if launcher.bwrap is not None:
        python = [*_bwrap_argv(launcher, cfg.workdir, cfg.disk_bytes), *python]
    ids = launcher.run_as
    proc = subprocess.Popen(
        python,
        stdin=stdin_fd,
        stdout=stdout_fd,
        stderr=stderr_fd,
        pass_fds=cfg.fds(),
        cwd=cfg.workdir,
        env=_child_env(cfg.workdir, launcher.runtime),
        start_new_session=True,
        user=None if ids is None else ids[0],
        group=None if ids is None else ids[1],
        extra_groups=None if ids is None else [],
    )
    proc.returncode = 0  # reaped by _kill_and_reap with os.wait4, not by Popen
    return proc.pid


def _give_to(owner: tuple[int, int] | None, workdir: str, *fds: int) -> None:
    """Hand the working directory and the stdio of a run to the uid it will drop to.

    Owning its stdio lets the program reopen it through /dev/stdin, /dev/stdout, /dev/stderr.
    """
    if owner is not None:
        os.chown(workdir, *owner)
        for fd in fds:
            os.fchown(fd, *owner)


def _owner(launcher: _Launcher, cfg: ChildConfig) -> tuple[int, int] | None:
    """The uid/gid the program's files belong to on the host, when not the caller's."""
    if launcher.run_as is not None:
        return launcher.run_as
    return None if cfg.uid is None or cfg.gid is None else (cfg.uid, cfg.gid)


def _execute(
    source: str,
    stdin: str,
    limits: SandboxLimits,
    cfg: ChildConfig,
    launcher: _Launcher,
    driver: str | None = None,
) -> SandboxResult:
    """Run one child with ``cfg`` (bootstrap config minus fds and directory) and collect it."""
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
    launcher: _Launcher, cfg: ChildConfig, stdin_fd: int, limits: SandboxLimits, started: float
) -> SandboxResult:
    marker = secrets.token_hex(12)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    report_r, report_w = os.pipe()
    verdict_r, verdict_w = os.pipe() if cfg.driver_fd is not None else (None, None)
    try:
        try:
            _give_to(_owner(launcher, cfg), cfg.workdir, stdin_fd, out_w, err_w)
            cfg = replace(cfg, report_fd=report_w, verdict_fd=verdict_w)
            pid = _spawn(launcher, cfg, stdin_fd, out_w, err_w, marker)
        except OSError as exc:
            return _sandbox_error(
                f"could not start the sandboxed program with {launcher.runtime.python}: {exc}",
                started,
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


def _report(fd: int) -> tuple[bool, tuple[int, float] | None]:
    """(the bootstrap started, the supervisor's (wait status, CPU s) if it wrote them)."""
    data = _read_available(fd, 64)
    if len(data) != 13:
        return data[:1] == b"1", None
    status, cpu_us = int.from_bytes(data[1:5], "little"), int.from_bytes(data[5:], "little")
    return True, (status, cpu_us / 1e6)


def _read_available(fd: int | None, limit: int = _READ_CHUNK) -> bytes:
    """What a finished run left in a pipe, up to ``limit`` bytes."""
    data = b""
    if fd is None:
        return data
    os.set_blocking(fd, False)
    with contextlib.suppress(BlockingIOError):
        while len(data) < limit and (chunk := os.read(fd, limit)):
            data += chunk
    return data[:limit]


def _finish(
    pid: int,
    fds: tuple[int, int, int, int | None],
    marker: str,
    limits: SandboxLimits,
    started: float,
) -> SandboxResult:
    stdout_fd, stderr_fd, report_fd, verdict_fd = fds
    out = _Output(limits.output_bytes)
    try:
        reason = _collect(pid, stdout_fd, stderr_fd, started + limits.wall_time_s, out)
    finally:
        status, cpu_s = _kill_and_reap(pid, marker)
    started_ok, supervised = _report(report_fd)
    if supervised is not None:  # under bubblewrap: the program's own status and CPU time
        status, cpu_s = supervised
    exit_code, sig = _exit_of(status)
    verdict = _classify(reason, exit_code, sig, cpu_s, limits)
    if not started_ok and reason is None:  # the bootstrap never ran: the sandbox failed
        verdict = SandboxStatus.SANDBOX_ERROR
    return SandboxResult(
        status=verdict,
        exit_code=exit_code,
        signal=sig,
        stdout=out.data[True].decode("utf-8", errors="replace"),
        stderr=out.data[False].decode("utf-8", errors="replace"),
        output_truncated=out.over,
        wall_time_s=time.monotonic() - started,
        cpu_time_s=cpu_s,
        report=_read_available(verdict_fd).decode("utf-8", errors="replace"),
    )


DEFAULT_LIMITS = SandboxLimits()
DEFAULT_POLICY = SandboxPolicy()
_PROBE_LIMITS = SandboxLimits(wall_time_s=20.0, cpu_time_s=10.0, memory_mb=512)
_NAMESPACE_KEYS = ("user_namespace", "network_namespace", "pid_namespace")


def _config(
    policy: SandboxPolicy,
    launcher: _Launcher,
    limits: SandboxLimits,
    *,
    namespaces: dict[str, bool] | None = None,
    ids: tuple[int, int] | None = None,
    landlock: bool = False,
    probe: bool = False,
) -> ChildConfig:
    """Bootstrap config (without the per-run fds and directory)."""
    namespaces = namespaces or dict.fromkeys(_NAMESPACE_KEYS, False)
    in_bwrap = launcher.bwrap is not None
    dedicated_uid = ids is not None or launcher.run_as is not None
    return ChildConfig(
        probe=probe,
        **namespaces,
        uid=ids[0] if ids else None,
        gid=ids[1] if ids else None,
        rlimits=_rlimits(limits),
        audit_hook=policy.audit_hook,
        parent_death_signal=not in_bwrap,  # bubblewrap's --die-with-parent covers it
        parent=os.getpid(),
        landlock_read=(*launcher.runtime.read_paths, *_DEVICES_READ) if landlock else None,
        unset_env=(*launcher.runtime.env, *(["PWD"] if in_bwrap else [])),
        supervise=in_bwrap,
        nproc=limits.processes if dedicated_uid else None,
        disk_bytes=limits.disk_bytes,
    )


def _probe(launcher: _Launcher, cfg: ChildConfig) -> dict[str, object]:
    """Run the bootstrap in probe mode; its report maps each step to True or an error string."""
    result = _execute("", "", _PROBE_LIMITS, cfg, launcher)
    lines = result.stdout.strip().splitlines()
    try:
        return dict(ast.literal_eval(lines[-1]))
    except (ValueError, SyntaxError, IndexError):
        return {
            "probe": f"probe run ended with {result.status.value}: {result.stderr.strip()[-300:]}"
        }


def _notes(report: dict[str, object], label: str = "") -> list[str]:
    return [f"{label}{key}: {value}" for key, value in report.items() if value is not True]


def _usable(report: dict[str, object], *steps: str) -> bool:
    return all(report.get(step) is True for step in ("usable", *steps))


def _bwrap_launchers(
    bwrap: str, base: Runtime, ids: tuple[int, int] | None, readable: Runtime | None
) -> list[tuple[str, _Launcher]]:
    """Ways to start bubblewrap, best first: as the unprivileged user, else as the caller."""
    launchers = []
    if ids is not None and readable is not None:
        launchers.append(("as the unprivileged user", _Launcher(readable, bwrap, run_as=ids)))
    launchers.append(("as the caller", _Launcher(base, bwrap, inner_ids=ids)))
    return launchers


def _try_bwrap(
    policy: SandboxPolicy,
    base: Runtime,
    ids: tuple[int, int] | None,
    readable: Runtime | None,
    notes: list[str],
) -> tuple[_Launcher, IsolationReport] | None:
    bwrap = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if bwrap is None:
        notes.append("bubblewrap: not installed (Debian/Ubuntu: apt-get install bubblewrap)")
        return None
    for label, launcher in _bwrap_launchers(bwrap, base, ids, readable):
        report = _probe(launcher, _config(policy, launcher, _PROBE_LIMITS, probe=True))
        if _usable(report, "rlimits", "no_new_privs"):
            isolation = IsolationReport(
                mode="bwrap",
                bubblewrap=True,
                network_namespace=True,
                pid_namespace=True,
                user_namespace=True,
                uid_drop=launcher.run_as is not None,
                landlock=False,
                process_limit=report.get("process_limit") is True,
                audit_hook=policy.audit_hook and report.get("audit_hook") is True,
                parent_death_signal=True,
                python=launcher.runtime.python,
                notes=tuple(notes),
            )
            return launcher, isolation
        notes.extend(_notes(report, f"bubblewrap {label}: "))
    return None


def _fallback(
    policy: SandboxPolicy,
    base: Runtime,
    ids: tuple[int, int] | None,
    readable: Runtime | None,
    notes: list[str],
) -> tuple[_Launcher, IsolationReport]:
    """The strongest working combination of namespaces, uid drop and Landlock."""
    wanted = {
        "user_namespace": policy.namespaces and os.geteuid() != 0,
        "network_namespace": policy.namespaces,
        "pid_namespace": policy.namespaces,
    }
    caller = _Launcher(base)
    first = _probe(caller, _config(policy, caller, _PROBE_LIMITS, namespaces=wanted, probe=True))
    namespaces = {key: wanted[key] and first.get(key) is True for key in _NAMESPACE_KEYS}
    notes.extend(_notes(first) if policy.namespaces else ["namespaces: disabled by policy"])
    landlock_choices = (True, False) if policy.landlock else (False,)
    choices = [(readable, ids, ll) for ll in landlock_choices if ids and readable]
    choices += [(base, None, ll) for ll in landlock_choices]
    for runtime, drop, landlock in choices:
        launcher = _Launcher(runtime)
        if drop is None and not landlock:
            report = first
        else:
            options = {"namespaces": namespaces, "ids": drop, "landlock": landlock, "probe": True}
            report = _probe(launcher, _config(policy, launcher, _PROBE_LIMITS, **options))
        steps = (("uid_drop",) if drop else ()) + (
            ("landlock", "landlock_denies") if landlock else ()
        )
        if _usable(report, *steps) or (drop is None and not landlock):
            break
        notes.extend(_notes(report, "uid drop: " if drop else "landlock: "))
    mode = "fallback-landlock" if landlock else "fallback-uid" if drop else "fallback-minimal"
    isolation = IsolationReport(
        mode=mode,
        bubblewrap=False,
        **namespaces,
        uid_drop=drop is not None,
        landlock=landlock,
        process_limit=report.get("process_limit") is True,
        audit_hook=policy.audit_hook and report.get("audit_hook") is True,
        parent_death_signal=report.get("parent_death_signal") is True,
        python=runtime.python,
        notes=tuple(notes),
    )
    return launcher, isolation


def _runtimes(
    policy: SandboxPolicy, ids: tuple[int, int] | None, notes: list[str]
) -> tuple[Runtime, Runtime | None]:
    """The caller's interpreter, and one the unprivileged user can read (None if none)."""
    base = describe(os.path.realpath(policy.python or sys.executable))
    if ids is None or runtime_readable_by_others(base):
        return base, base if ids is not None else None
    try:
        return base, readable_copy(base)
    except OSError as exc:
        notes.append(
            f"uid_drop: {base.python} is not readable by {policy.user!r} and no copy: {exc}"
        )
        return base, None


@functools.lru_cache(maxsize=16)
def _plan(policy: SandboxPolicy) -> tuple[_Launcher | None, IsolationReport]:
    notes: list[str] = []
    ids = _user_ids(policy, notes)
    try:
        base, readable = _runtimes(policy, ids, notes)
    except OSError as exc:
        off = dict.fromkeys(("bubblewrap", *_NAMESPACE_KEYS, "uid_drop", "landlock"), False)
        report = IsolationReport(
            mode="unavailable",
            **off,
            process_limit=False,
            audit_hook=False,
            parent_death_signal=False,
            python=policy.python or sys.executable,
            notes=(*notes, f"interpreter: {exc}"),
        )
        return None, report
    planned = None
    if policy.bubblewrap and policy.namespaces:
        planned = _try_bwrap(policy, base, ids, readable, notes)
    elif policy.bubblewrap:
        notes.append("bubblewrap: needs namespaces, disabled by policy")
    launcher, report = planned or _fallback(policy, base, ids, readable, notes)
    logger.info("sandbox isolation: %s (%s)", report.mode, ", ".join(report.active()))
    for note in report.notes:
        logger.debug("sandbox isolation note: %s", note)
    return launcher, report


def isolation_report(policy: SandboxPolicy = DEFAULT_POLICY) -> IsolationReport:
    """Probe (once per policy and process) which isolation layers work on this machine.

    Runs the child bootstrap in probe mode under bubblewrap and, failing that, with every
    requested layer; the layers that fail are left out of later runs (and listed in
    ``notes``). The result is logged once, at INFO level.
    """
    return _plan(policy)[1]


def isolation_mode(policy: SandboxPolicy = DEFAULT_POLICY) -> str:
    """The isolation runs under ``policy`` get here: one of :data:`ISOLATION_MODES`.

    Record it once per training or evaluation run.
    """
    return isolation_report(policy).mode


def isolation_level(mode: str) -> int:
    """A number for ``mode`` to log as a metric: 4 ``bwrap`` ... 1 ``fallback-minimal``, 0 ``unavailable``."""
    return len(ISOLATION_MODES) - ISOLATION_MODES.index(mode) if mode in ISOLATION_MODES else 0


def _run_config(
    limits: SandboxLimits, policy: SandboxPolicy, launcher: _Launcher, report: IsolationReport
) -> ChildConfig:
    namespaces = {key: getattr(report, key) and launcher.bwrap is None for key in _NAMESPACE_KEYS}
    ids = None
    if report.uid_drop and launcher.bwrap is None:
        ids = _user_ids(policy, [])
    cfg = _config(
        policy, launcher, limits, namespaces=namespaces, ids=ids, landlock=report.landlock
    )
    return replace(
        cfg,
        parent_death_signal=cfg.parent_death_signal and report.parent_death_signal,
        nproc=cfg.nproc if report.process_limit else None,
    )


def run_untrusted(
    source: str,
    *,
    stdin: str = "",
    limits: SandboxLimits = DEFAULT_LIMITS,
    policy: SandboxPolicy = DEFAULT_POLICY,
    driver: str | None = None,
) -> SandboxResult:
    """Run the Python program ``source`` in a sandbox, feeding it ``stdin``.

    With ``driver`` (Python source), the run has a second process, forked by the bootstrap
    after every isolation layer is in place and before any untrusted code runs. The program's
    process runs ``source`` and then serves calls; the driver's process runs ``driver`` with
    two functions in its globals: ``call_program(name, args, kwargs)`` calls the function
    ``name`` of the program's namespace, with plain data in and out
    (:mod:`rlvr.sandbox.plain`; the program's exceptions come back by builtin class name),
    and ``report(text)`` writes a line to :attr:`SandboxResult.report`, a channel the program
    never holds. Neither returns before the program has run to the end; if the program ends
    first, the driver leaves with the program's exit status. The run's status is the driver's.

    Safe to call from several threads at once (no Python code runs between fork and exec).
    Returns when the child and everything it started are dead and reaped and the working
    directory is gone. Start-up failures give status ``sandbox_error`` rather than raising.

    >>> run_untrusted("print(sum(map(int, input().split())))", stdin="2 3").stdout
    '5\\n'
    >>> run_untrusted("while True: pass", limits=SandboxLimits(wall_time_s=0.5)).status.value
    'timeout'
    """
    started = time.monotonic()
    launcher, report = _plan(policy)
    if launcher is None:
        return _sandbox_error(f"no interpreter to run the program: {report.notes[-1]}", started)
    cfg = _run_config(limits, policy, launcher, report)
    return _execute(source, stdin, limits, cfg, launcher, driver)
