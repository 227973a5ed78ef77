"""Running a program in the sandbox (:func:`run_untrusted`) with the layers that work here.

They are probed once per policy and process: the child bootstrap runs in probe mode (every
layer attempted, failures recorded, nothing run) under bubblewrap and, failing that, with
the strongest working combination of namespaces, uid drop and Landlock; the mode and the
layers found are logged once, and every later run gets exactly those layers.
"""

from __future__ import annotations

import ast
import functools
import logging
import os
import pwd
import shutil
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from rlvr.sandbox.interpreter import Runtime, describe, readable_copy, runtime_readable_by_others
from rlvr.sandbox.launch import NAMESPACES, ChildConfig, Launcher, child_config
from rlvr.sandbox.limits import (
    DEFAULT_LIMITS,
    DEFAULT_POLICY,
    IsolationReport,
    SandboxLimits,
    SandboxPolicy,
    SandboxResult,
)
from rlvr.sandbox.process import execute, sandbox_error

_PROBE_LIMITS = SandboxLimits(wall_time_s=20.0, cpu_time_s=10.0, memory_mb=512)
logger = logging.getLogger(__name__)


def user_ids(policy: SandboxPolicy, notes: list[str]) -> tuple[int, int] | None:
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


def _notes(report: dict[str, object], label: str = "") -> list[str]:
    return [f"{label}{key}: {value}" for key, value in report.items() if value is not True]


def _usable(report: dict[str, object], *steps: str) -> bool:
    return all(report.get(step) is True for step in ("usable", *steps))


@dataclass
class _Planner:
    """Probes for one policy (``ids`` from :func:`user_ids`, ``base`` and ``readable`` from
    :func:`_runtimes`); ``notes`` gathers why a requested layer is missing."""

    policy: SandboxPolicy
    ids: tuple[int, int] | None
    base: Runtime
    readable: Runtime | None
    notes: list[str]

    def probe(self, launcher: Launcher, **options: Any) -> dict[str, object]:
        """Run the bootstrap in probe mode; its report maps each step to True or an error."""
        cfg = child_config(self.policy, launcher, _PROBE_LIMITS, probe=True, **options)
        result = execute("", "", _PROBE_LIMITS, cfg, launcher)
        try:
            return dict(ast.literal_eval(result.stdout.strip().splitlines()[-1]))
        except (ValueError, SyntaxError, IndexError):
            tail = result.stderr.strip()[-300:]
            return {"probe": f"probe run ended with {result.status.value}: {tail}"}

    def found(self, mode: str, launcher: Launcher, report: dict, **layers: bool):
        return launcher, IsolationReport(
            mode=mode,
            **layers,
            process_limit=report.get("process_limit") is True,
            audit_hook=self.policy.audit_hook and report.get("audit_hook") is True,
            python=launcher.runtime.python,
            notes=tuple(self.notes),
        )

    def bwrap(self) -> tuple[Launcher, IsolationReport] | None:
        """bubblewrap started as the unprivileged user, else as the caller; None if neither works."""
        bwrap = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
        if bwrap is None:
            self.notes.append(
                "bubblewrap: not installed (Debian/Ubuntu: apt-get install bubblewrap)"
            )
            return None
        launchers = [("as the caller", Launcher(self.base, bwrap, inner_ids=self.ids))]
        if self.ids is not None and self.readable is not None:
            launcher = Launcher(self.readable, bwrap, run_as=self.ids)
            launchers.insert(0, ("as the unprivileged user", launcher))
        for label, launcher in launchers:
            report = self.probe(launcher)
            if _usable(report, "rlimits", "no_new_privs"):
                layers = dict.fromkeys(("bubblewrap", *NAMESPACES, "parent_death_signal"), True)
                layers.update(uid_drop=launcher.run_as is not None)
                return self.found("bwrap", launcher, report, **layers)
            self.notes.extend(_notes(report, f"bubblewrap {label}: "))
        return None

    def fallback(self) -> tuple[Launcher, IsolationReport]:
        """The strongest working combination of namespaces, uid drop and Landlock."""
        policy = self.policy
        wanted = dict.fromkeys(NAMESPACES, policy.namespaces)
        wanted["user_namespace"] = policy.namespaces and os.geteuid() != 0
        first = self.probe(Launcher(self.base), namespaces=wanted)
        namespaces = {key: wanted[key] and first.get(key) is True for key in NAMESPACES}
        self.notes.extend(
            _notes(first) if policy.namespaces else ["namespaces: disabled by policy"]
        )
        landlock_choices = (True, False) if policy.landlock else (False,)
        choices = [
            (self.readable, self.ids, ll) for ll in landlock_choices if self.ids and self.readable
        ]
        choices += [(self.base, None, ll) for ll in landlock_choices]
        for runtime, drop, landlock in choices:
            launcher = Launcher(runtime)
            if drop is None and not landlock:  # the first probe's: the weakest mode always runs
                report = first
                break
            report = self.probe(launcher, namespaces=namespaces, ids=drop, landlock=landlock)
            steps = ("uid_drop",) if drop else ()
            if _usable(report, *steps, *(("landlock", "landlock_denies") if landlock else ())):
                break
            self.notes.extend(_notes(report, "uid drop: " if drop else "landlock: "))
        mode = "fallback-landlock" if landlock else "fallback-uid" if drop else "fallback-minimal"
        pdeath = report.get("parent_death_signal") is True
        layers = {**namespaces, "uid_drop": drop is not None, "landlock": landlock}
        return self.found(mode, launcher, report, parent_death_signal=pdeath, **layers)


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
def plan(policy: SandboxPolicy) -> tuple[Launcher | None, IsolationReport]:
    """How runs under ``policy`` are started here, and the isolation they get."""
    notes: list[str] = []
    ids = user_ids(policy, notes)
    try:
        base, readable = _runtimes(policy, ids, notes)
    except OSError as exc:
        python = policy.python or sys.executable
        notes.append(f"interpreter: {exc}")
        return None, IsolationReport(mode="unavailable", python=python, notes=tuple(notes))
    planner, planned = _Planner(policy, ids, base, readable, notes), None
    if policy.bubblewrap and policy.namespaces:
        planned = planner.bwrap()
    elif policy.bubblewrap:
        notes.append("bubblewrap: needs namespaces, disabled by policy")
    launcher, report = planned or planner.fallback()
    logger.info("sandbox isolation: %s (%s)", report.mode, ", ".join(report.active()))
    for note in report.notes:
        logger.debug("sandbox isolation note: %s", note)
    return launcher, report


def isolation_report(policy: SandboxPolicy = DEFAULT_POLICY) -> IsolationReport:
    """Probe (once per policy and process) which isolation layers work on this machine; the
    layers that fail are left out of later runs and listed in ``notes``."""
    return plan(policy)[1]


def isolation_mode(policy: SandboxPolicy = DEFAULT_POLICY) -> str:
    """The isolation runs under ``policy`` get here, one of :data:`ISOLATION_MODES`; record it
    once per training or evaluation run."""
    return isolation_report(policy).mode


def _run_config(
    limits: SandboxLimits, policy: SandboxPolicy, launcher: Launcher, report: IsolationReport
) -> ChildConfig:
    """The message of a run: the layers the probe found, those bubblewrap covers left out."""
    direct = launcher.bwrap is None
    namespaces = {key: getattr(report, key) and direct for key in NAMESPACES}
    ids = user_ids(policy, []) if report.uid_drop and direct else None
    cfg = child_config(
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

    With ``driver`` (Python source), a second process runs it with ``call_program(name, args,
    kwargs)`` (the program's function, plain data in and out) and ``report(text)`` (a line of
    :attr:`SandboxResult.report`, a channel the program never holds) in its globals; the run's
    status is the driver's (``docs/sandbox.md``, "The test driver").

    Safe to call from several threads at once (no Python code runs between fork and exec).
    Returns when the child and everything it started are dead and reaped and the working
    directory is gone. Start-up failures give status ``sandbox_error`` rather than raising.

    >>> run_untrusted("print(sum(map(int, input().split())))", stdin="2 3").stdout
    '5\\n'
    >>> run_untrusted("while True: pass", limits=SandboxLimits(wall_time_s=0.5)).status.value
    'timeout'
    """
    started = time.monotonic()
    launcher, report = plan(policy)
    if launcher is None:
        return sandbox_error(f"no interpreter to run the program: {report.notes[-1]}", started)
    return execute(
        source, stdin, limits, _run_config(limits, policy, launcher, report), launcher, driver
    )
