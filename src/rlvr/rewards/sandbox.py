"""Run untrusted Python in a child process with resource limits and layered isolation.

:func:`run_untrusted` starts ``python -I -S`` on a program in a fresh working directory and
returns a :class:`SandboxResult`. The layers, and how far each can be trusted:

Always (kernel-enforced wherever the child starts at all):
  own session and process group; a wall-clock limit after which the group is SIGKILLed and
  reaped; ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, no core files; an
  output cap (stdout and stderr are read incrementally, the run is killed past the cap); a
  throw-away working directory deleted afterwards; an empty environment apart from ``PATH``,
  ``HOME``/``TMPDIR`` (the working directory) and a UTF-8 locale; isolated mode (no
  site-packages, no ``PYTHON*`` variables).
Where the machine allows (see :func:`isolation_report`; a layer that the probe found working
is then required, and a run whose set-up fails is reported as ``sandbox_error``):
  death with the caller (``PR_SET_PDEATHSIG``); a network namespace (no network at all); a
  PID namespace (the program runs as PID 2 under an init that reaps orphans, and everything
  left dies with the namespace); a user namespace when not root (needed for the other two);
  when started as root, a drop to an unprivileged uid (writes only where that uid may write,
  ``RLIMIT_NPROC`` enforced), keeping only ``CAP_DAC_READ_SEARCH`` when the interpreter lives
  in a directory that uid cannot read.
Best effort (a tripwire that deliberately hostile code can defeat):
  an audit hook inside the child refusing fork/exec/subprocess, signals, sockets, ctypes,
  sub-interpreters, raising limits, and filesystem changes outside the working directory; a
  scan of ``/proc`` for processes carrying the run's marker argument after every run.
Not provided: seccomp filters, a read-only view of the filesystem (without a uid drop the
program can write wherever the caller can, unless the audit hook stops it; with one it can
still write to world-writable directories such as ``/tmp``), cgroup memory or process
accounting, disk quotas (each file is capped, their number is not). ``docs/sandbox.md`` has the
threat model.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO

# Exit statuses reserved by the child bootstrap (_sandbox_child.py defines the same numbers);
# a program that exits with one of them on purpose is classified accordingly.
EXIT_MEMORY = 251
EXIT_SETUP = 252
EXIT_SYNTAX = 253
MARKER_FLAG = "--rlvr-sandbox="
"""Prefix of the argument that marks every sandboxed process (and its forks) in /proc."""

_READ_CHUNK = 1 << 16


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
    """Interpreter that runs the program; empty means ``sys.executable``."""


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

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0 within every limit."""
        return self.status is SandboxStatus.OK


@dataclass(frozen=True)
class IsolationReport:
    """Which layers runs under one policy get on this machine (from :func:`isolation_report`)."""

    network_namespace: bool
    """Own network namespace: no interfaces but a down loopback."""
    pid_namespace: bool
    """Own PID namespace: the program's processes die with it."""
    user_namespace: bool
    """Own user namespace (used when not root, to be allowed the other namespaces)."""
    uid_drop: bool
    """The program runs as the policy's unprivileged user (only when started as root)."""
    read_capability: bool
    """The uid drop keeps CAP_DAC_READ_SEARCH because the interpreter is not world-readable."""
    process_limit: bool
    """RLIMIT_NPROC is in force (it needs a dedicated non-root uid)."""
    audit_hook: bool
    """The in-interpreter audit hook is installed."""
    parent_death_signal: bool
    """The run is SIGKILLed if the calling process dies (``PR_SET_PDEATHSIG``)."""
    isolated_interpreter: bool = True
    """``python -I -S``: no site-packages, environment variables or user site."""
    notes: tuple[str, ...] = ()
    """Why a requested layer is missing, one line per layer."""

    def active(self) -> tuple[str, ...]:
        """Names of the layers in force."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is True)


@functools.cache
def _child_source() -> str:
    return Path(__file__).with_name("_sandbox_child.py").read_text(encoding="utf-8")


def _rlimits(limits: SandboxLimits) -> dict[str, list[int]]:
    cpu = max(1, math.ceil(limits.cpu_time_s))
    memory = limits.memory_mb << 20
    return {
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_AS": [memory, memory],
        "RLIMIT_FSIZE": [limits.file_bytes, limits.file_bytes],
        "RLIMIT_NOFILE": [limits.open_files, limits.open_files],
    }


def _user_ids(policy: SandboxPolicy) -> tuple[int, int] | None:
    """uid/gid to drop to, or None when no drop is asked for or possible."""
    if not policy.drop_privileges or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(policy.user)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _child_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
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
    reason: str | None, status: int, cpu_s: float, limits: SandboxLimits
) -> SandboxStatus:
    if reason == "output":
        return SandboxStatus.OUTPUT_LIMIT
    if reason == "timeout":
        return SandboxStatus.TIMEOUT
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
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
    return by_code.get(os.WEXITSTATUS(status), SandboxStatus.ERROR)


def _temp_file(data: str) -> IO[bytes]:
    f = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it
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


def _spawn(
    python: str, cfg: dict, stdin_fd: int, stdout_fd: int, stderr_fd: int, marker: str
) -> int:
    """Start the bootstrap in its own session; returns its pid."""
    argv = [python, "-I", "-S", "-X", "utf8", "-c", _child_source(), MARKER_FLAG + marker]
    argv.append(marshal.dumps(cfg).hex())
    proc = subprocess.Popen(
        argv,
        stdin=stdin_fd,
        stdout=stdout_fd,
        stderr=stderr_fd,
        pass_fds=(cfg["code_fd"],),
        cwd=cfg["workdir"],
        env=_child_env(cfg["workdir"]),
        start_new_session=True,
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


def _execute(
    source: str, stdin: str, limits: SandboxLimits, cfg: dict, python: str
) -> SandboxResult:
    """Run one child with ``cfg`` (bootstrap config minus fds and directory) and collect it."""
    started = time.monotonic()
    workdir = os.path.realpath(tempfile.mkdtemp(prefix="rlvr-sandbox-"))
    try:
        with _temp_file(source) as code_f, _temp_file(stdin) as stdin_f:
            cfg = {**cfg, "code_fd": code_f.fileno(), "workdir": workdir}
            return _launch(python, cfg, stdin_f.fileno(), limits, started)
    finally:
        _remove_tree(workdir)


def _launch(
    python: str, cfg: dict, stdin_fd: int, limits: SandboxLimits, started: float
) -> SandboxResult:
    owner = None if cfg["uid"] is None else (cfg["uid"], cfg["gid"])
    marker = secrets.token_hex(12)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        try:
            _give_to(owner, cfg["workdir"], stdin_fd, out_w, err_w)
            pid = _spawn(python, cfg, stdin_fd, out_w, err_w, marker)
        except OSError as exc:
            return _sandbox_error(
                f"could not start the sandboxed program with {python}: {exc}", started
            )
        finally:
            os.close(out_w)  # the child holds its own copies; EOF comes when it is done
            os.close(err_w)
        return _finish(pid, out_r, err_r, marker, limits, started)
    finally:
        os.close(out_r)
        os.close(err_r)


def _finish(
    pid: int, stdout_fd: int, stderr_fd: int, marker: str, limits: SandboxLimits, started: float
) -> SandboxResult:
    out = _Output(limits.output_bytes)
    try:
        reason = _collect(pid, stdout_fd, stderr_fd, started + limits.wall_time_s, out)
    finally:
        status, cpu_s = _kill_and_reap(pid, marker)
    signaled = os.WIFSIGNALED(status)
    return SandboxResult(
        status=_classify(reason, status, cpu_s, limits),
        exit_code=None if signaled else os.WEXITSTATUS(status),
        signal=os.WTERMSIG(status) if signaled else None,
        stdout=out.data[True].decode("utf-8", errors="replace"),
        stderr=out.data[False].decode("utf-8", errors="replace"),
        output_truncated=out.over,
        wall_time_s=time.monotonic() - started,
        cpu_time_s=cpu_s,
    )


DEFAULT_LIMITS = SandboxLimits()
DEFAULT_POLICY = SandboxPolicy()
_PROBE_LIMITS = SandboxLimits(wall_time_s=20.0, cpu_time_s=10.0, memory_mb=512)
_NAMESPACE_KEYS = ("user_namespace", "network_namespace", "pid_namespace")


def _probe_config(
    policy: SandboxPolicy, namespaces: dict[str, bool], ids: tuple[int, int] | None, keep_read: bool
) -> dict:
    cfg = {
        "probe": True,
        "userns": namespaces["user_namespace"],
        "netns": namespaces["network_namespace"],
        "pidns": namespaces["pid_namespace"],
        "uid": ids[0] if ids else None,
        "gid": ids[1] if ids else None,
        "keep_read": keep_read,
        "rlimits": _rlimits(_PROBE_LIMITS),
        "hook": policy.audit_hook,
        "pdeathsig": True,
        "parent": os.getpid(),
    }
    if ids:
        cfg["nproc"] = [_PROBE_LIMITS.processes] * 2
    return cfg


def _probe(policy: SandboxPolicy, cfg: dict) -> dict[str, object]:
    """Run the bootstrap in probe mode; its report maps each step to True or an error string."""
    result = _execute("", "", _PROBE_LIMITS, cfg, policy.python or sys.executable)
    lines = result.stdout.strip().splitlines()
    try:
        return dict(ast.literal_eval(lines[-1]))
    except (ValueError, SyntaxError, IndexError):
        return {
            "probe": f"probe run ended with {result.status.value}: {result.stderr.strip()[-300:]}"
        }


def _notes(report: dict[str, object]) -> list[str]:
    return [f"{key}: {value}" for key, value in report.items() if value is not True]


def _probe_uid_drop(
    policy: SandboxPolicy, namespaces: dict[str, bool], notes: list[str]
) -> tuple[bool, bool, bool]:
    """(uid drop works, it needs CAP_DAC_READ_SEARCH, RLIMIT_NPROC works)."""
    ids = _user_ids(policy)
    if ids is None:
        notes.append(
            "uid_drop: "
            + (
                "disabled by policy"
                if not policy.drop_privileges
                else "not running as root"
                if os.geteuid()
                else f"no user {policy.user!r}"
            )
        )
        return False, False, False
    for keep_read in (False, True):
        report = _probe(policy, _probe_config(policy, namespaces, ids, keep_read))
        if report.get("uid_drop_usable") is True:
            return True, keep_read, report.get("process_limit") is True
        notes.extend(
            f"{'with' if keep_read else 'without'} read capability: {n}" for n in _notes(report)
        )
    return False, False, False


@functools.lru_cache(maxsize=16)
def isolation_report(policy: SandboxPolicy = DEFAULT_POLICY) -> IsolationReport:
    """Probe (once per policy and process) which isolation layers work on this machine.

    Runs the child bootstrap in probe mode: every requested layer is attempted and the ones
    that fail are left out of later runs (and listed in ``notes``).
    """
    wanted = {
        "user_namespace": policy.namespaces and os.geteuid() != 0,
        "network_namespace": policy.namespaces,
        "pid_namespace": policy.namespaces,
    }
    base = _probe(policy, _probe_config(policy, wanted, None, False))
    namespaces = {key: wanted[key] and base.get(key) is True for key in _NAMESPACE_KEYS}
    notes = _notes(base) if policy.namespaces else ["namespaces: disabled by policy"]
    drop, keep_read, nproc = _probe_uid_drop(policy, namespaces, notes)
    return IsolationReport(
        **namespaces,
        uid_drop=drop,
        read_capability=keep_read,
        process_limit=nproc,
        audit_hook=policy.audit_hook and base.get("audit_hook") is True,
        parent_death_signal=base.get("parent_death_signal") is True,
        notes=tuple(notes),
    )


def _run_config(limits: SandboxLimits, policy: SandboxPolicy, report: IsolationReport) -> dict:
    ids = _user_ids(policy) if report.uid_drop else None
    cfg = {
        "probe": False,
        "userns": report.user_namespace,
        "netns": report.network_namespace,
        "pidns": report.pid_namespace,
        "uid": ids[0] if ids else None,
        "gid": ids[1] if ids else None,
        "keep_read": report.read_capability,
        "rlimits": _rlimits(limits),
        "hook": policy.audit_hook,
        "pdeathsig": report.parent_death_signal,
        "parent": os.getpid(),
    }
    if ids and report.process_limit:
        cfg["nproc"] = [limits.processes] * 2
    return cfg


def run_untrusted(
    source: str,
    *,
    stdin: str = "",
    limits: SandboxLimits = DEFAULT_LIMITS,
    policy: SandboxPolicy = DEFAULT_POLICY,
) -> SandboxResult:
    """Run the Python program ``source`` in a sandbox, feeding it ``stdin``.

    Safe to call from several threads at once (no Python code runs between fork and exec).
    Returns when the child and everything it started are dead and reaped and the working
    directory is gone. Start-up failures give status ``sandbox_error`` rather than raising.

    >>> run_untrusted("print(sum(map(int, input().split())))", stdin="2 3").stdout
    '5\\n'
    >>> run_untrusted("while True: pass", limits=SandboxLimits(wall_time_s=0.5)).status.value
    'timeout'
    """
    report = isolation_report(policy)
    cfg = _run_config(limits, policy, report)
    return _execute(source, stdin, limits, cfg, policy.python or sys.executable)
