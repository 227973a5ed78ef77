"""Scoring batches of completions: time limits, failure accounting, worker processes.

A verifier that raises, returns a non-finite number or runs out of time gives its
``failure_value`` for that completion, is counted in :class:`Scores`, and never stops the
batch. Use worker processes in training: each is a fresh interpreter in its own session, killed
with everything it started past ``timeout_s + kill_grace_s``, with the verifier pickled to it
(its function must be importable by module path) and warmed up before the first item.
"""

from __future__ import annotations

import contextlib
import math
import pickle
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

from rlvr.rewards.events import EVENTS, counting
from rlvr.rewards.registry import Verifier, get_verifier
from rlvr.sandbox.bounded import VerifierTimeout, time_limit
from rlvr.sandbox.workers import DIED, OVERDUE, Pool, connect, serve

OK, ERROR, TIMEOUT = "ok", "error", "timeout"


@dataclass(frozen=True)
class ScoringConfig:
    """How a batch of completions is scored."""

    timeout_s: float | None = 10.0
    """Wall-clock limit per completion in seconds (``None``: no limit)."""
    workers: int = 1
    """Worker processes (0: score in the calling thread, where a long C call cannot be cut off)."""
    kill_grace_s: float = 2.0
    """Extra seconds a worker gets past ``timeout_s`` before it is killed."""

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:  # nan too
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s}")
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, got {self.workers}")
        if self.kill_grace_s < 0:
            raise ValueError(f"kill_grace_s must be >= 0, got {self.kill_grace_s}")


@dataclass
class Scores:
    """Scores of one batch, in input order, with the failures counted."""

    values: list[float]
    """One score per completion (the failure value where verification failed)."""
    status: list[str]
    """Per completion: ``"ok"``, ``"error"`` (the verifier raised) or ``"timeout"``."""
    errors: list[str | None] = field(default_factory=list)
    """Per completion: the error message, or ``None``."""
    events: list[dict[str, int]] = field(default_factory=list)
    """Per completion: the events its verifier recorded, e.g. ``{"asserts_in_process": 2}``."""

    @property
    def failures(self) -> int:
        """Completions whose verifier raised or returned a non-finite score."""
        return self.status.count(ERROR)

    @property
    def timeouts(self) -> int:
        """Completions whose verifier ran out of time."""
        return self.status.count(TIMEOUT)

    def event_count(self, name: str) -> int:
        """Sum over the batch of the event ``name`` (a key of :data:`rlvr.rewards.events.EVENTS`)."""
        if name not in EVENTS:
            raise ValueError(f"unknown verifier event {name!r}; valid: {', '.join(sorted(EVENTS))}")
        return sum(counts.get(name, 0) for counts in self.events)

    def metrics(self) -> dict[str, float]:
        """Counts for logging, always the same keys: ``verifier/failures``, ``verifier/timeouts``
        and ``verifier/<event>`` for every event in :data:`rlvr.rewards.events.EVENTS`."""
        counts = {"failures": self.failures, "timeouts": self.timeouts}
        counts |= {name: self.event_count(name) for name in EVENTS}
        return {f"verifier/{name}": float(count) for name, count in counts.items()}


class Row(NamedTuple):
    """One completion's entries of :class:`Scores` (plain data: it travels back from workers)."""

    status: str
    value: float
    error: str | None
    events: dict[str, int]


def score_one(verifier: Verifier, completion: str, reference: Any, timeout_s: float | None) -> Row:
    """One completion's :class:`Row`; never raises for verifier errors."""
    with counting() as events:
        try:
            with time_limit(timeout_s):
                value = float(verifier(completion, reference))
        except VerifierTimeout:
            return Row(TIMEOUT, verifier.failure_value, f"timed out after {timeout_s:g} s", events)
        # A verifier bug or bad input must not stop training; a worker process that exits is
        # counted too, so inline scoring counts a verifier's sys.exit() the same way.
        except (Exception, SystemExit) as err:
            return Row(ERROR, verifier.failure_value, f"{type(err).__name__}: {err}", events)
    if not math.isfinite(value):
        return Row(ERROR, verifier.failure_value, f"non-finite score {value}", events)
    return Row(OK, value, None, events)


def _worker_main(read_fd: int, write_fd: int) -> None:
    """Worker process: receive the verifier, then score ``(completion, reference)`` messages."""
    inbox, outbox = connect(read_fd, write_fd)
    verifier, timeout_s = inbox.recv()
    with contextlib.suppress(Exception):  # a failed warm-up shows again on the first item
        verifier.warm_up()
    outbox.send("ready")

    def score(message: tuple, outbox: Connection) -> None:
        try:
            outbox.send(score_one(verifier, *message, timeout_s))
        except Exception:  # an unpicklable result: report it rather than die silently
            outbox.send(Row(ERROR, verifier.failure_value, traceback.format_exc(limit=1), {}))

    serve(inbox, outbox, score)


class Scorer:
    """Scores batches with one verifier; owns the worker processes when ``workers >= 1``: use it
    as a context manager (or call :meth:`close`) so they stop (``docs/rewards.md`` shows one)."""

    def __init__(self, verifier: Verifier | str, config: ScoringConfig = ScoringConfig()) -> None:
        self._pool: Pool | None = None
        self._warm = False
        self.verifier = get_verifier(verifier)
        self.config = config

    def __call__(self, completions: Sequence[str], references: Sequence[Any]) -> Scores:
        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        items = list(zip(completions, references, strict=True))
        if not items:
            return Scores(values=[], status=[], errors=[], events=[])
        if self.config.workers == 0:
            self._warm_up()
            rows = [score_one(self.verifier, c, r, self.config.timeout_s) for c, r in items]
        else:
            rows = self._in_workers(items)
        status, values, errors, events = (list(column) for column in zip(*rows, strict=True))
        return Scores(values=values, status=status, errors=errors, events=events)

    def _warm_up(self) -> None:
        """Start the verifier's helpers once, outside the per-completion time limit."""
        if not self._warm:
            self._warm = True
            with contextlib.suppress(Exception):  # a failed warm-up shows again when scoring
                self.verifier.warm_up()

    def _in_workers(self, items: list[tuple[str, Any]]) -> list[Row]:
        """Rows scored by the worker processes, one that overruns or dies killed and counted."""
        if self._pool is None:
            try:
                pickle.dumps(self.verifier)
            except Exception as err:
                raise ValueError(
                    f"verifier {self.verifier.spec!r} cannot be sent to worker processes ({err}); "
                    "register a module-level function, or use workers=0"
                ) from err
            self._pool = Pool(
                _worker_main,
                own_session=True,  # killing a worker kills its sandboxes and helpers too
                greeting=(self.verifier, self.config.timeout_s),
                keep=self.config.workers,
                start_error=f"verifier worker process failed to start for {self.verifier.spec!r}: "
                "its function must be importable by module path (not defined in __main__); "
                "see the traceback above, or use workers=0",
            )
        t, failed = self.config.timeout_s, self.verifier.failure_value
        limit = math.inf if t is None else t + self.config.kill_grace_s
        rows = self._pool.map(items, self.config.workers, limit)
        for i, row in enumerate(rows):
            if row is DIED:
                rows[i] = Row(ERROR, failed, "verifier worker process died", {})
            elif row is OVERDUE:
                rows[i] = Row(TIMEOUT, failed, f"timed out after {t:g} s (worker killed)", {})
        return rows

    def close(self) -> None:
        """Stop the worker processes (the scorer restarts them if called again)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def score_completions(
    verifier: Verifier | str,
    completions: Sequence[str],
    references: Sequence[Any],
    *,
    timeout_s: float | None = 10.0,
    workers: int = 0,
) -> Scores:
    r"""Score ``completions[i]`` against ``references[i]``; failures score the failure value.

    >>> s = score_completions("math", [r"\boxed{2}", "no answer", r"\boxed{3}"], ["2", "2", "2"])
    >>> s.values, s.failures, s.timeouts
    ([1.0, 0.0, 0.0], 0, 0)
    """
    with Scorer(verifier, ScoringConfig(timeout_s=timeout_s, workers=workers)) as scorer:
        return scorer(completions, references)
