"""Live progress: a ``rich`` bar with reward and entropy, or plain lines off a terminal."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple

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


class Headline(NamedTuple):
    """One metric on the progress line."""

    metric: str
    """Its name in the step's metrics."""
    label: str
    """What the line calls it."""
    percent: bool = False
    """Shown as a percentage (small shares such as 0.0005 -> ``0.05%``), else to 3 decimals."""

    def text(self, value: float) -> str:
        return f"{self.label} {100 * value:.2f}%" if self.percent else f"{self.label} {value:.3f}"


class ProgressReporter:
    """Shows each step's headline metrics (``shown``: :class:`Headline` entries, or
    ``(metric name, label)`` pairs).

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
        shown: Sequence[tuple[str, str] | Headline],
    ) -> None:
        self.console = Console(file=sys.stderr)
        self.mode = cfg.progress
        if self.mode == "auto":
            self.mode = "on" if self.console.is_terminal else "lines"
        self.total, self.title = total, title
        self.shown = [Headline(*entry) for entry in shown]
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
        parts = [h.text(metrics[h.metric]) for h in self.shown if metrics.get(h.metric) is not None]
        return "  ".join(parts)

    def step(self, step: int, metrics: Mapping[str, float | None]) -> None:
        """Report that ``step`` finished with ``metrics``."""
        if self._bar is not None:
            self._bar.update(self._task, completed=step, stats=self._stats(metrics))
        elif self.mode == "lines" and (step % self.line_every == 0 or step == self.total):
            self.console.print(
                f"{self.title} step {step}/{self.total}  {self._stats(metrics)}",
                highlight=False,
                soft_wrap=True,  # one line per step in a log file, however long
            )

    def message(self, text: str) -> None:
        """Print a line (above the bar when there is one); with progress off only a line that
        starts with ``warning:`` (an unconfined sandbox must not pass unsaid)."""
        if self.mode != "off" or text.startswith("warning:"):
            self.console.print(text, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the bar."""
        if self._bar is not None:
            self._bar.stop()
