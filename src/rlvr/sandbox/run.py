"""Running a program in the sandbox: :func:`run_untrusted`."""

from __future__ import annotations

import time
from dataclasses import replace

from rlvr.sandbox.isolation import plan, user_ids
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
