"""Ctrl-C or SIGTERM during a run: the first stops it after the step in flight, with a checkpoint.

A step is the unit a checkpoint can hold, so the first SIGINT (Ctrl-C) or SIGTERM (what a
cluster's pre-emption, ``kill`` or a container's stop sends before SIGKILL) only asks the
step loop to stop once the step in flight has finished (and been logged); the loop then saves
a checkpoint, whatever ``checkpoint.every`` says, and raises ``KeyboardInterrupt`` so that
``--resume`` continues from that step. A second signal raises ``KeyboardInterrupt`` at once,
without a checkpoint. Either is a :class:`Stopped` naming the signal, so that the command line
exits as the signal's default action would have (130 for SIGINT, 143 for SIGTERM). The handlers are installed only on the main thread and only over
Python's own (``signal.default_int_handler`` for SIGINT, the default action for SIGTERM): a
caller that handles either signal itself keeps it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType

ASKED = (
    "{name}: stopping after the step in flight with a checkpoint "
    "(Ctrl-C or SIGTERM again stops at once, without one)"
)
ASKED_BEFORE_TRAINING = (
    "{name}: stopping after the evaluation before training, without a checkpoint "
    "(no step has run; Ctrl-C or SIGTERM again stops at once)"
)
_PYTHONS_OWN = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
"""The handler each signal has unless someone installed another: only those are replaced."""
_ACTIVE: list[StopRequest] = []
"""The requests of the runs in progress in this process (:func:`ask_to_stop`)."""


def signal_name(signum: int) -> str:
    """How a stop's messages name its signal: ``Ctrl-C`` for SIGINT, else its name (``SIGTERM``)."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class Stopped(KeyboardInterrupt):
    """A run stopped by the signal ``signum`` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class ResumableError(RuntimeError):
    """A failure that stops a run which ``--resume`` continues from its last checkpoint (the
    run adds how to its message): the steps before it stand."""


def stop_asked() -> bool:
    """Whether a run in progress in this process was already asked to stop."""
    return any(request.asked for request in _ACTIVE)


def ask_to_stop(signum: int) -> bool:
    """Ask the runs in progress in this process to stop after their step in flight, as a
    first ``signum`` would, but idempotently: a run already asked (a signal reached it, say
    from a scheduler that signals every process of a job) is left as it is, and the ask does
    not make the next signal a second one. False when no run is in progress."""
    for request in _ACTIVE:
        request.ask(signum)
    return bool(_ACTIVE)


class StopRequest:
    """``with StopRequest() as stop:`` ... ``stop.asked`` once Ctrl-C or SIGTERM came once (or
    :func:`ask_to_stop` asked)."""

    def __init__(self) -> None:
        self.asked = False
        self.signalled = False
        """Whether a signal reached it: a second one stops at once."""
        self.signum: int = signal.SIGINT
        """The signal that asked (the last one)."""
        self.said = ASKED
        """What a first signal is told (:data:`ASKED`; before any step, :data:`ASKED_BEFORE_TRAINING`)."""
        self._installed: list[signal.Signals] = []

    def ask(self, signum: int) -> None:
        """Stop after the step in flight, as a first ``signum`` would (nothing when asked)."""
        if not self.asked:
            self.asked, self.signum = True, signum
            print(self.said.format(name=signal_name(signum)), file=sys.stderr, flush=True)

    def __enter__(self) -> StopRequest:
        _ACTIVE.append(self)
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum, own in _PYTHONS_OWN.items():
            if signal.getsignal(signum) is own:
                signal.signal(signum, self._handle)
                self._installed.append(signum)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signalled:
            self.signum = signum
            raise Stopped(signum)
        self.signalled = True
        self.ask(signum)
        self.signum = signum

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _ACTIVE.remove(self)
        for signum in self._installed:
            signal.signal(signum, _PYTHONS_OWN[signum])
        self._installed = []


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Meet SIGTERM (a scheduler's stop, ``kill``) as Ctrl-C in the block: :class:`Stopped`
    is raised, so the command says what it kept and exits 143. Installed only on the main
    thread and over the default action, and put back after the block."""
    main = threading.current_thread() is threading.main_thread()
    installed = main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    if installed:
        signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        if installed and signal.getsignal(signal.SIGTERM) is _raise_stopped:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
