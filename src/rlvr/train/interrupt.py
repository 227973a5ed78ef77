"""Ctrl-C during a run: the first stops it after the step in flight, with a checkpoint.

A step is the unit a checkpoint can hold, so the first SIGINT only asks the step loop to
stop once the step in flight has finished (and been logged); the loop then saves a
checkpoint, whatever ``checkpoint.every`` says, and raises ``KeyboardInterrupt`` so that
``--resume`` continues from that step. A second Ctrl-C raises ``KeyboardInterrupt`` at once,
without a checkpoint. The handler is installed only on the main thread and only over
Python's own (``signal.default_int_handler``): a caller that handles SIGINT itself keeps it.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType, TracebackType

ASKED = (
    "Ctrl-C: stopping after the step in flight with a checkpoint "
    "(Ctrl-C again stops at once, without one)"
)


class StopRequest:
    """``with StopRequest() as stop:`` ... ``stop.asked`` once Ctrl-C was pressed once."""

    def __init__(self) -> None:
        self.asked = False
        self._installed = False

    def __enter__(self) -> StopRequest:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True
        print(ASKED, file=sys.stderr, flush=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self._installed = False
