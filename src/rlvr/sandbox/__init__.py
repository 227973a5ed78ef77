"""Running untrusted code: the sandbox, bounded calls and helper processes.

Nothing here knows about verifiers; verifiers (:mod:`rlvr.rewards`) build on it.

- :func:`run_untrusted` (:mod:`.run`) runs a Python program in a child process under
  :class:`SandboxLimits` with the isolation :class:`SandboxPolicy` asks for and the machine
  allows (:mod:`.isolation` probes it once: bubblewrap, namespaces, uid drop, Landlock;
  :func:`isolation_mode` names the result). :mod:`.launch` builds the child's command line
  and its one message (:class:`~rlvr.sandbox.launch.ChildConfig`), :mod:`.process` starts,
  watches (:mod:`.output`), kills and reaps it, :mod:`.child` is the bootstrap inside it and
  :mod:`.interpreter` the interpreter it runs. With a test driver (:mod:`.driver`) the test
  runs in a second process that calls the program through a pipe (:mod:`.channel`) of plain
  data (:mod:`.plain`).
- :func:`~rlvr.sandbox.bounded.call_bounded` calls a trusted function under a hard time and
  memory limit; :func:`~rlvr.sandbox.timeout.time_limit` interrupts Python code in a thread;
  :mod:`.workers` is the pool of helper processes both the scorer and bounded calls use.

``docs/sandbox.md`` has the threat model and what each isolation mode guarantees.
"""

from rlvr.sandbox.child import EXIT_MEMORY, EXIT_SETUP, EXIT_SYNTAX
from rlvr.sandbox.isolation import isolation_mode, isolation_report
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
from rlvr.sandbox.run import run_untrusted

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
