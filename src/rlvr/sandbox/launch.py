"""How a run is started: the interpreter and bubblewrap around it, and the one message
(:class:`ChildConfig`) the parent sends the child bootstrap (:mod:`rlvr.sandbox.child`)."""

from __future__ import annotations

import functools
import marshal
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from rlvr.sandbox.interpreter import SYSTEM_PATHS, Runtime
from rlvr.sandbox.limits import SandboxLimits, SandboxPolicy

MARKER_FLAG = "--rlvr-sandbox="
"""Prefix of the argument that marks every sandboxed process (and its forks) in /proc."""
NAMESPACES = ("user_namespace", "network_namespace", "pid_namespace")
_DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero", "/dev/full")
_PACKAGE_DIRS = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Launcher:
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
    """The one message from the parent to the bootstrap of a run, a ``marshal`` dump of its
    fields on the child's command line (the child reads them as attributes)."""

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
    """Descriptor of the test driver's source, or None."""
    verdict_fd: int | None = None
    """Descriptor the driver reports on."""

    def fds(self) -> tuple[int, ...]:
        """The descriptors the child inherits."""
        held = (self.code_fd, self.report_fd, self.driver_fd, self.verdict_fd)
        return tuple(fd for fd in held if fd is not None)


def child_config(
    policy: SandboxPolicy,
    launcher: Launcher,
    limits: SandboxLimits,
    *,
    namespaces: dict[str, bool] | None = None,
    ids: tuple[int, int] | None = None,
    landlock: bool = False,
    probe: bool = False,
) -> ChildConfig:
    """The message for runs with these layers (without the per-run descriptors and directory)."""
    in_bwrap = launcher.bwrap is not None
    cpu, memory = max(1, math.ceil(limits.cpu_time_s)), limits.memory_mb << 20
    rlimits = {"RLIMIT_CPU": [cpu, cpu + 1], "RLIMIT_AS": [memory, memory]}
    rlimits["RLIMIT_FSIZE"] = [limits.file_bytes, limits.file_bytes]
    rlimits["RLIMIT_NOFILE"] = [limits.open_files, limits.open_files]
    return ChildConfig(
        probe=probe,
        **(namespaces or dict.fromkeys(NAMESPACES, False)),
        uid=ids[0] if ids else None,
        gid=ids[1] if ids else None,
        rlimits=rlimits,
        audit_hook=policy.audit_hook,
        parent_death_signal=not in_bwrap,  # bubblewrap's --die-with-parent covers it
        parent=os.getpid(),
        landlock_read=(*launcher.runtime.read_paths, *_DEVICES_READ) if landlock else None,
        unset_env=(*launcher.runtime.env, *(["PWD"] if in_bwrap else [])),
        supervise=in_bwrap,
        nproc=limits.processes if ids is not None or launcher.run_as is not None else None,
        disk_bytes=limits.disk_bytes,
    )


@functools.cache
def _child_source() -> str:
    """The bootstrap, preceded by its test driver channel and the plain-data codec it uses."""
    here = Path(__file__).parent
    return "\n".join(
        (here / name).read_text(encoding="utf-8") for name in ("plain.py", "channel.py", "child.py")
    )


def command(launcher: Launcher, cfg: ChildConfig, marker: str) -> list[str]:
    """The child's command line: ``python -I -S -c <bootstrap> <marker> <message>``, inside
    bubblewrap when the launcher has it."""
    message = marshal.dumps({f.name: getattr(cfg, f.name) for f in fields(cfg)}).hex()
    python = [launcher.runtime.python, "-I", "-S", "-X", "utf8", "-c", _child_source()]
    python += [MARKER_FLAG + marker, message]
    if launcher.bwrap is None:
        return python
    return [*_bwrap_argv(launcher, cfg.workdir, cfg.disk_bytes), *python]


def _bwrap_argv(launcher: Launcher, workdir: str, disk_bytes: int) -> list[str]:
    """bubblewrap's options: fresh namespaces, the interpreter's files read-only, the workdir
    the only writable place: a tmpfs of ``disk_bytes`` at the host directory's path."""
    argv = [str(launcher.bwrap), "--unshare-user", "--unshare-pid", "--unshare-net"]
    argv += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]
    argv += ["--new-session"]
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


def child_env(workdir: str, runtime: Runtime) -> dict[str, str]:
    """The child's whole environment."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir}
    return {**env, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **runtime.env}
