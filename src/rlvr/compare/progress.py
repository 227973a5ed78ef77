"""A study's progress: a live ``rich`` table of arm x seed on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rlvr.compare.runner import PLAIN_EVERY_S, RunState
from rlvr.compare.study import DEFAULT_REGIME

STYLE = {"done": "dim", "finished": "green", "failed": "red", "running": "bold", "queued": ""}


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _plan_line(states: list[RunState]) -> str:
    """How many runs are reused, resumed and started: ``6 runs: 4 finished earlier (reused),
    0 to resume, 2 to start``."""
    done = sum(s.status == "done" for s in states)
    resumed = sum(s.status == "queued" and s.resumed for s in states)
    started = sum(s.status == "queued" and not s.resumed for s in states)
    return (
        f"{len(states)} runs: {done} finished earlier (reused), {resumed} to resume, "
        f"{started} to start"
    )


class StudyDisplay:
    """``event(state, what)`` when a run starts or ends; ``refresh(states)`` every poll."""

    def __init__(self, states: list[RunState], *, live: bool | None = None) -> None:
        self.console = Console(file=sys.stderr)
        self.live_mode = self.console.is_terminal if live is None else live
        self.start, self.last_plain = time.monotonic(), time.monotonic()
        self.live: Live | None = None
        if self.live_mode:
            self.live = Live(self._table(states), console=self.console, refresh_per_second=2)
            self.live.start()
        else:
            self.console.print(_plan_line(states), highlight=False, soft_wrap=True)

    def _table(self, states: list[RunState]) -> Table:
        done = sum(s.status in ("done", "finished") for s in states)
        table = Table(
            title=f"{done}/{len(states)} runs finished, {_minutes(time.monotonic() - self.start)} elapsed"
        )
        regimes = any(s.spec.regime != DEFAULT_REGIME for s in states)
        columns = ("arm", "regime") if regimes else ("arm",)
        for name in (*columns, "seed", "status", "step", "time"):
            table.add_column(name, justify="right" if name in ("seed", "step", "time") else "left")
        for s in states:
            elapsed = _minutes(s.elapsed) if s.status in ("running", "finished", "failed") else ""
            where = (s.spec.arm.name, s.spec.regime) if regimes else (s.spec.arm.name,)
            row = (*where, str(s.spec.seed), s.status, f"{s.step}/{s.total}", elapsed)
            table.add_row(*(Text(cell) for cell in row), style=STYLE.get(s.status, ""))
        return table

    def event(self, state: RunState, what: str) -> None:
        if self.live is not None:
            return
        extra = f" in {_minutes(state.elapsed)}" if what in ("finished", "failed") else ""
        hint = f" (log: {state.log})" if what == "failed" else ""
        self.console.print(
            f"{state.spec.key:<32} {what}{extra}{hint}",
            highlight=False,
            soft_wrap=True,
            markup=False,  # a regime's "[off-policy]" is text, not a rich style tag
        )

    def refresh(self, states: list[RunState]) -> None:
        if self.live is not None:
            self.live.update(self._table(states))
            return
        if time.monotonic() - self.last_plain < PLAIN_EVERY_S:
            return
        self.last_plain = time.monotonic()
        done = sum(s.status in ("done", "finished") for s in states)
        running = [s for s in states if s.status == "running"]
        text = "; ".join(f"{s.spec.key} step {s.step}/{s.total}" for s in running)
        self.console.print(
            f"{done}/{len(states)} runs finished; running: {text or 'none'}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )

    def close(self, states: list[RunState]) -> None:
        if self.live is not None:
            self.live.update(self._table(states))
            self.live.stop()
