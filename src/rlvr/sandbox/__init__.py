"""Running untrusted code: the sandbox, bounded calls and helper processes.

Nothing here knows about verifiers (:mod:`rlvr.rewards` builds on it). :func:`run_untrusted`
runs a Python program under :class:`SandboxLimits` with the isolation :class:`SandboxPolicy`
asks for and the machine allows (:func:`isolation_mode`); :func:`~rlvr.sandbox.bounded.call_bounded`
calls a trusted function under a hard time and memory limit. ``docs/sandbox.md`` has the map
of the modules, the threat model and what each isolation mode guarantees.
"""

from rlvr.sandbox.child import EXIT_MEMORY, EXIT_SETUP, EXIT_SYNTAX
from rlvr.sandbox.isolation import isolation_mode, isolation_report, run_untrusted
from rlvr.sandbox.launch import MARKER_FLAG
from rlvr.sandbox.limits import (
    DEFAULT_LIMITS,
    DEFAULT_POLICY,
    ISOLATION_MODES,
    IsolationReport,
    SandboxError,
    SandboxLimits,
    SandboxPolicy,
    SandboxResult,
    SandboxStatus,
    isolation_level,
)

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_POLICY",
    "EXIT_MEMORY",
    "EXIT_SETUP",
    "EXIT_SYNTAX",
    "ISOLATION_MODES",
    "MARKER_FLAG",
    "IsolationReport",
    "SandboxError",
    "SandboxLimits",
    "SandboxPolicy",
    "SandboxResult",
    "SandboxStatus",
    "isolation_level",
    "isolation_mode",
    "isolation_report",
    "run_untrusted",
]
