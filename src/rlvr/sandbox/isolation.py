"""Which isolation layers work on this machine: probed once per policy and process.

The child bootstrap runs in probe mode (every layer attempted, failures recorded, nothing
run) under bubblewrap and, failing that, with the strongest working combination of
namespaces, uid drop and Landlock; the mode and the layers found are logged once.
"""

from __future__ import annotations

import ast
import functools
import logging
import os
import pwd
import shutil
import sys

from rlvr.sandbox.interpreter import Runtime, describe, readable_copy, runtime_readable_by_others
from rlvr.sandbox.launch import NAMESPACES, ChildConfig, Launcher, child_config
from rlvr.sandbox.limits import DEFAULT_POLICY, IsolationReport, SandboxLimits, SandboxPolicy
from rlvr.sandbox.process import execute

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


def _probe(launcher: Launcher, cfg: ChildConfig) -> dict[str, object]:
    """Run the bootstrap in probe mode; its report maps each step to True or an error string."""
    result = execute("", "", _PROBE_LIMITS, cfg, launcher)
    lines = result.stdout.strip().splitlines()
    try:
        return dict(ast.literal_eval(lines[-1]))
    except (ValueError, SyntaxError, IndexError):
        tail = result.stderr.strip()[-300:]
        return {"probe": f"probe run ended with {result.status.value}: {tail}"}


def _notes(report: dict[str, object], label: str = "") -> list[str]:
    return [f"{label}{key}: {value}" for key, value in report.items() if value is not True]


def _usable(report: dict[str, object], *steps: str) -> bool:
    return all(report.get(step) is True for step in ("usable", *steps))


def _isolation(
    mode: str, launcher: Launcher, policy: SandboxPolicy, report: dict, notes: list[str], **layers
) -> IsolationReport:
    return IsolationReport(
        mode=mode,
        **layers,
        process_limit=report.get("process_limit") is True,
        audit_hook=policy.audit_hook and report.get("audit_hook") is True,
        python=launcher.runtime.python,
        notes=tuple(notes),
    )


def _try_bwrap(
    policy: SandboxPolicy,
    base: Runtime,
    ids: tuple[int, int] | None,
    readable: Runtime | None,
    notes: list[str],
) -> tuple[Launcher, IsolationReport] | None:
    """bubblewrap started as the unprivileged user, else as the caller; None if neither works."""
    bwrap = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if bwrap is None:
        notes.append("bubblewrap: not installed (Debian/Ubuntu: apt-get install bubblewrap)")
        return None
    launchers = [("as the caller", Launcher(base, bwrap, inner_ids=ids))]
    if ids is not None and readable is not None:
        launchers.insert(0, ("as the unprivileged user", Launcher(readable, bwrap, run_as=ids)))
    for label, launcher in launchers:
        report = _probe(launcher, child_config(policy, launcher, _PROBE_LIMITS, probe=True))
        if _usable(report, "rlimits", "no_new_privs"):
            layers = dict.fromkeys(("bubblewrap", *NAMESPACES, "parent_death_signal"), True)
            layers.update(uid_drop=launcher.run_as is not None, landlock=False)
            return launcher, _isolation("bwrap", launcher, policy, report, notes, **layers)
        notes.extend(_notes(report, f"bubblewrap {label}: "))
    return None


def _fallback(
    policy: SandboxPolicy,
    base: Runtime,
    ids: tuple[int, int] | None,
    readable: Runtime | None,
    notes: list[str],
) -> tuple[Launcher, IsolationReport]:
    """The strongest working combination of namespaces, uid drop and Landlock."""
    wanted = dict.fromkeys(NAMESPACES, policy.namespaces)
    wanted["user_namespace"] = policy.namespaces and os.geteuid() != 0
    caller = Launcher(base)
    first = _probe(
        caller, child_config(policy, caller, _PROBE_LIMITS, namespaces=wanted, probe=True)
    )
    namespaces = {key: wanted[key] and first.get(key) is True for key in NAMESPACES}
    notes.extend(_notes(first) if policy.namespaces else ["namespaces: disabled by policy"])
    landlock_choices = (True, False) if policy.landlock else (False,)
    choices = [(readable, ids, ll) for ll in landlock_choices if ids and readable]
    choices += [(base, None, ll) for ll in landlock_choices]
    for runtime, drop, landlock in choices:
        launcher = Launcher(runtime)
        if drop is None and not landlock:  # the first probe's: the weakest mode always runs
            report = first
            break
        options = {"namespaces": namespaces, "ids": drop, "landlock": landlock, "probe": True}
        report = _probe(launcher, child_config(policy, launcher, _PROBE_LIMITS, **options))
        steps = (("uid_drop",) if drop else ()) + (
            ("landlock", "landlock_denies") if landlock else ()
        )
        if _usable(report, *steps):
            break
        notes.extend(_notes(report, "uid drop: " if drop else "landlock: "))
    mode = "fallback-landlock" if landlock else "fallback-uid" if drop else "fallback-minimal"
    layers = {"bubblewrap": False, **namespaces, "uid_drop": drop is not None, "landlock": landlock}
    layers["parent_death_signal"] = report.get("parent_death_signal") is True
    return launcher, _isolation(mode, launcher, policy, report, notes, **layers)


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
        off = dict.fromkeys(("bubblewrap", *NAMESPACES, "uid_drop", "landlock"), False)
        off.update(process_limit=False, audit_hook=False, parent_death_signal=False)
        python = policy.python or sys.executable
        notes.append(f"interpreter: {exc}")
        return None, IsolationReport(mode="unavailable", **off, python=python, notes=tuple(notes))
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
    """Probe (once per policy and process) which isolation layers work on this machine; the
    layers that fail are left out of later runs and listed in ``notes``."""
    return plan(policy)[1]


def isolation_mode(policy: SandboxPolicy = DEFAULT_POLICY) -> str:
    """The isolation runs under ``policy`` get here, one of :data:`ISOLATION_MODES`; record it
    once per training or evaluation run."""
    return isolation_report(policy).mode
