"""Scoring batches of completions: time limits, failure accounting, worker processes.

:class:`Scorer` is what the trainer and the evaluation harness call. Each completion is
scored by the verifier under a wall-clock limit; a verifier that raises, returns a
non-finite number or runs out of time gives the verifier's ``failure_value`` (its
``wrong`` score) for that completion, is counted in :class:`Scores`, and never stops the
batch.

``workers=0`` scores in the calling thread (any thread: the limit is enforced by
:func:`rlvr.sandbox.timeout.time_limit`, which interrupts Python code but not one long C
call). ``workers >= 1`` scores in that many worker processes, which both spreads scoring
over cores and makes the limit hard: a verifier stuck in a C call that would never return
is cut off. (The ``math`` verifier bounds its own SymPy work, see :mod:`rlvr.rewards.math`.)
Before the first completion, the scorer calls :meth:`Verifier.warm_up` (in each worker), so
that helpers a verifier starts lazily are not charged to a completion's time limit. Events a
verifier records (:mod:`rlvr.rewards.events`) are collected per completion into
:attr:`Scores.events`. Workers are fresh Python interpreters in their own session,
started on first use and reused across calls; one that overruns ``timeout_s +
kill_grace_s`` or dies is killed with its whole session and replaced. The verifier is sent
to them pickled, so its function must be importable by module path (not defined in
``__main__``). Use workers in training: a policy will sooner or later write an answer
that makes SymPy compute for hours.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import pickle
import subprocess
import time
import traceback
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, NamedTuple

from rlvr.rewards.events import EVENTS, counting
from rlvr.rewards.registry import Verifier, get_verifier
from rlvr.sandbox.timeout import VerifierTimeout, time_limit
from rlvr.sandbox.workers import Helper, connect, serve, spawn

OK, ERROR, TIMEOUT = "ok", "error", "timeout"
_START_TIMEOUT_S = 120.0


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
        if self.timeout_s is not None and self.timeout_s <= 0:
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
    """Per completion: what its verifier counted (:mod:`rlvr.rewards.events`), e.g.
    ``{"asserts_in_process": 2}``; empty when nothing was recorded."""

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
        """Counts for logging, always the same keys: ``verifier/failures``,
        ``verifier/timeouts`` and ``verifier/<event>`` for every event in
        :data:`rlvr.rewards.events.EVENTS`."""
        counts = {
            "verifier/failures": float(self.failures),
            "verifier/timeouts": float(self.timeouts),
        }
        counts.update({f"verifier/{name}": float(self.event_count(name)) for name in EVENTS})
        return counts


class Row(NamedTuple):
    """One scored completion (plain data: it travels back from worker processes)."""

    status: str
    """``"ok"``, ``"error"`` or ``"timeout"``."""
    value: float
    """The score (the failure value when verification failed)."""
    error: str | None
    """What went wrong, or ``None``."""
    events: dict[str, int]
    """Verifier events counted while scoring it (:data:`rlvr.rewards.events.EVENTS`)."""


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
    """Worker process: receive the verifier, then score ``(index, completion, reference)``."""
    inbox, outbox = connect(read_fd, write_fd)
    verifier, timeout_s = inbox.recv()
    with contextlib.suppress(Exception):  # a failed warm-up shows again on the first item
        verifier.warm_up()
    outbox.send("ready")

    def score(message: tuple, outbox: Connection) -> None:
        index, completion, reference = message
        try:
            outbox.send((index, *score_one(verifier, completion, reference, timeout_s)))
        except Exception:  # an unpicklable result: report it rather than die silently
            error = traceback.format_exc(limit=1)
            outbox.send((index, *Row(ERROR, verifier.failure_value, error, {})))

    serve(inbox, outbox, score)


@dataclass(eq=False)
class _Worker:
    link: Helper
    """The worker process (its own session: killing it takes its sandboxes with it)."""
    index: int | None = None
    """Item being scored, or ``None`` when idle."""
    deadline: float = math.inf


def _spawn_worker(verifier: Verifier, timeout_s: float | None) -> _Worker:
    """Start a worker in a fresh interpreter (its own session) and hand it the verifier."""
    worker = _Worker(spawn(_worker_main, own_session=True))
    worker.link.outbox.send((verifier, timeout_s))
    return worker


def _kill(worker: _Worker) -> None:
    worker.link.kill()


class _Pool:
    """Worker processes scoring items with a hard per-item deadline."""

    def __init__(self, verifier: Verifier, config: ScoringConfig) -> None:
        self.verifier, self.config = verifier, config
        self.workers: list[_Worker] = []
        try:
            pickle.dumps(verifier)
        except Exception as err:
            raise ValueError(
                f"verifier {verifier.spec!r} cannot be sent to worker processes ({err}); "
                "register a module-level function, or use workers=0"
            ) from err
        try:
            for _ in range(config.workers):
                self.workers.append(self._start())
        except BaseException:
            self.close()
            raise

    def _start(self) -> _Worker:
        worker = _spawn_worker(self.verifier, self.config.timeout_s)
        ready = worker.link.inbox.poll(_START_TIMEOUT_S)
        try:
            ready = ready and worker.link.inbox.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            _kill(worker)
            raise RuntimeError(
                f"verifier worker process failed to start for {self.verifier.spec!r}: its function must be "
                "importable by module path (not defined in __main__); see the traceback above, or use workers=0"
            )
        return worker

    def _replace(self, worker: _Worker) -> None:
        _kill(worker)
        self.workers[self.workers.index(worker)] = self._start()

    def _hard_limit(self) -> float:
        t = self.config.timeout_s
        return math.inf if t is None else t + self.config.kill_grace_s

    def run(self, items: Sequence[tuple[str, Any]]) -> list[Row]:
        results: list[Row | None] = [None] * len(items)
        pending = deque(range(len(items)))
        while pending or any(w.index is not None for w in self.workers):
            self._dispatch(pending, items)
            self._collect(results)
            self._reap_overdue(results)
        return results  # type: ignore[return-value]

    def _dispatch(self, pending: deque[int], items: Sequence[tuple[str, Any]]) -> None:
        for worker in self.workers:
            if worker.index is None and pending:
                index = pending.popleft()
                worker.link.outbox.send((index, *items[index]))
                worker.index, worker.deadline = index, time.monotonic() + self._hard_limit()

    def _collect(self, results: list) -> None:
        busy = {w.link.inbox: w for w in self.workers if w.index is not None}
        if not busy:
            return
        wait_s = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
        for conn in wait(list(busy), timeout=min(wait_s, 3600.0)):
            worker = busy[conn]
            try:
                index, *row = conn.recv()
            except (EOFError, OSError):
                message = "verifier worker process died"
                results[worker.index] = Row(ERROR, self.verifier.failure_value, message, {})
                self._replace(worker)
                continue
            results[index] = Row(*row)
            worker.index, worker.deadline = None, math.inf

    def _reap_overdue(self, results: list) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            if worker.index is not None and now >= worker.deadline:
                message = f"timed out after {self.config.timeout_s:g} s (worker killed)"
                results[worker.index] = Row(TIMEOUT, self.verifier.failure_value, message, {})
                self._replace(worker)

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(OSError, ValueError):
                worker.link.outbox.send(None)
        for worker in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.link.process.wait(timeout=2)
            _kill(worker)
        self.workers = []


_LIVE_POOLS: weakref.WeakSet[_Pool] = weakref.WeakSet()


@atexit.register
def _close_live_pools() -> None:
    """Stop worker processes before ``multiprocessing`` joins them at interpreter exit."""
    for pool in list(_LIVE_POOLS):
        pool.close()


class Scorer:
    """Scores batches with one verifier; owns the worker processes when ``workers >= 1``.

    Use as a context manager (or call :meth:`close`) so the workers stop::

        with Scorer(get_verifier("math"), ScoringConfig(workers=2)) as scorer:
            scores = scorer(completions, references)
    """

    def __init__(self, verifier: Verifier | str, config: ScoringConfig = ScoringConfig()) -> None:
        self._pool: _Pool | None = None
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
            rows = self._pool_or_start().run(items)
        status, values, errors, events = zip(*rows, strict=True)
        return Scores(
            values=list(values), status=list(status), errors=list(errors), events=list(events)
        )

    def _warm_up(self) -> None:
        """Start the verifier's helpers once, outside the per-completion time limit."""
        if not self._warm:
            self._warm = True
            with contextlib.suppress(Exception):  # a failed warm-up shows again when scoring
                self.verifier.warm_up()

    def _pool_or_start(self) -> _Pool:
        if self._pool is None:
            self._pool = _Pool(self.verifier, self.config)
            _LIVE_POOLS.add(self._pool)
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (the scorer restarts them if called again)."""
        if self._pool is not None:
            self._pool.close()
            _LIVE_POOLS.discard(self._pool)
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
