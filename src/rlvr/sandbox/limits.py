"""The sandbox's public types: limits and policy of a run, its result, the isolation report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields

ISOLATION_MODES = ("bwrap", "fallback-landlock", "fallback-uid", "fallback-minimal")
"""Isolation modes, strongest first; docs/sandbox.md says what each guarantees."""


class SandboxError(RuntimeError):
    """The sandbox could not run a program (as opposed to the program failing)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run."""

    wall_time_s: float = 10.0
    """Wall-clock limit; past it the process group is killed and the status is ``timeout``
    (time the run waited for a CPU held by others does not count, up to this much again)."""
    cpu_time_s: float = 10.0
    """CPU-time limit (RLIMIT_CPU, rounded up to whole seconds; SIGKILL one second later)."""
    memory_mb: int = 1024
    """Address-space limit in MiB (RLIMIT_AS: virtual memory, so leave headroom over RSS)."""
    output_bytes: int = 1 << 20
    """Cap on stdout plus stderr; past it the run is killed and the status is ``output_limit``."""
    file_bytes: int = 16 << 20
    """Largest file the program may write (RLIMIT_FSIZE)."""
    disk_bytes: int = 64 << 20
    """All files of the working directory together; only under bubblewrap (a tmpfs this size)."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    processes: int = 256
    """Tasks of the sandbox uid (RLIMIT_NPROC, threads included); applied only after a uid drop."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value > 0:
                raise ValueError(f"SandboxLimits.{f.name} must be positive, got {value!r}")


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


DEFAULT_LIMITS = SandboxLimits()
DEFAULT_POLICY = SandboxPolicy()


class SandboxStatus(str, enum.Enum):
    """How a sandboxed run ended."""

    OK = "ok"  # exit status 0
    ERROR = "error"  # another exit status
    TIMEOUT = "timeout"  # wall-clock or CPU limit
    MEMORY = "memory"  # MemoryError
    OUTPUT_LIMIT = "output_limit"  # stdout plus stderr passed the cap
    KILLED = "killed"  # another signal
    SYNTAX_ERROR = "syntax_error"  # the program did not compile
    SANDBOX_ERROR = "sandbox_error"  # the sandbox itself failed to start the program


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run."""

    status: SandboxStatus
    """How the run ended (see :class:`SandboxStatus`)."""
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
    """Which layers runs under one policy get here (:func:`isolation_report`); the rest are off."""

    mode: str
    """One of :data:`ISOLATION_MODES`, or ``unavailable`` when the interpreter cannot run."""
    bubblewrap: bool = False
    network_namespace: bool = False
    """Own network namespace: no interfaces but a down loopback."""
    pid_namespace: bool = False
    """Own PID namespace: the program's processes die with it."""
    user_namespace: bool = False
    """Own user namespace (bubblewrap's, or ours when not root, to be allowed the other two)."""
    uid_drop: bool = False
    """The program runs as the policy's unprivileged user, with no capability."""
    landlock: bool = False
    """Landlock limits file access to reading the interpreter's files and the working directory."""
    process_limit: bool = False
    """RLIMIT_NPROC is in force (it needs a dedicated non-root uid)."""
    audit_hook: bool = False
    parent_death_signal: bool = False
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


def isolation_level(mode: str) -> int:
    """``mode`` as a number to log: 4 ``bwrap`` ... 1 ``fallback-minimal``, 0 ``unavailable``."""
    return len(ISOLATION_MODES) - ISOLATION_MODES.index(mode) if mode in ISOLATION_MODES else 0
