"""Live progress: a ``rich`` bar with reward and entropy, or plain lines off a terminal."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from rlvr.train.config import LogConfig

MAX_PLAIN_LINES = 50
"""Off a terminal, about this many step lines per run (every step of a short run)."""


class ProgressReporter:
    """Shows each step's headline metrics (``shown``: ``(metric name, label)`` pairs).

    On a terminal a live bar; elsewhere (logs, CI) plain lines, thinned to about
    :data:`MAX_PLAIN_LINES` per run plus the last step.
    """

    def __init__(
        self,
        cfg: LogConfig,
        *,
        total: int,
        start: int,
        title: str,
        shown: Sequence[tuple[str, str]],
    ) -> None:
        self.console = Console(file=sys.stderr)
        self.mode = cfg.progress
        if self.mode == "auto":
            self.mode = "on" if self.console.is_terminal else "lines"
        self.total, self.shown, self.title = total, shown, title
        self.line_every = max(1, total // MAX_PLAIN_LINES)
        self._bar = None
        if self.mode == "on":
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._task = self._bar.add_task(title, total=total, completed=start, stats="")
            self._bar.start()

    def _stats(self, metrics: Mapping[str, float | None]) -> str:
        parts = [
            f"{label} {metrics[name]:.3f}"
            for name, label in self.shown
            if metrics.get(name) is not None
        ]
        return "  ".join(parts)

    def step(self, step: int, metrics: Mapping[str, float | None]) -> None:
        """Report that ``step`` finished with ``metrics``."""
        if self._bar is not None:
            self._bar.update(self._task, completed=step, stats=self._stats(metrics))
        elif self.mode == "lines" and (step % self.line_every == 0 or step == self.total):
            self.console.print(
                f"{self.title} step {step}/{self.total}  {self._stats(metrics)}", highlight=False
            )

    def message(self, text: str) -> None:
        """Print a line (above the bar when there is one), unless progress is off."""
        if self.mode != "off":
            self.console.print(text, highlight=False)

    def close(self) -> None:
        """Stop the bar."""
        if self._bar is not None:
            self._bar.stop()
