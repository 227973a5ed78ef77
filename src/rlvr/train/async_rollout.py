"""Asynchronous rollouts with bounded staleness (``rollout.staleness = k >= 1``).

A generation worker, a process of its own with its own torch threads
(``rollout.generation_threads``), samples and scores the next batches while the trainer
updates on the current one::

    synchronous   trainer  [gen 1][upd 1][gen 2][upd 2][gen 3][upd 3]
    staleness 1   worker   [gen 1][gen 2 (w0)][gen 3 (w1)][gen 4 (w2)]
                  trainer         [upd 1     ][upd 2     ][upd 3     ]

Schedule: the batch trained at step ``s`` is sampled from the weights after step
``max(s0, s - 1 - k)`` (``s0``: the step the process started from, 0 or the resumed
checkpoint's), so its staleness, the optimiser updates (steps) between the weights that
sampled it and those that train on it, is ``min(s - 1 - s0, k)``: never above k. The
schedule is fixed, not "the newest weights at hand", so a run does not depend on timing:
the same seed gives the same batches, and resuming is exact. Batch ``s`` draws from the
torch, Python and NumPy RNGs seeded by ``(seed, s)``.

Weights: the trainer copies its weights after each step into one of ``k + 1`` slots of
shared memory (step ``v`` into slot ``v % (k + 1)``); the slot it overwrites held the weights
of step ``v - k - 1``, which sampled batch ``v``, already trained on. The copy is all the
trainer pays; the worker loads the slot it needs before each batch.

Behaviour log-probs: the worker recomputes them with the exact weights that sampled the
batch (the same log-prob pass the trainer runs), right after sampling, so the objective's
ratio is against the generating policy (:mod:`rlvr.train.update`).

Checkpoints: :meth:`RolloutStream.state_dict` (the run's data order in the checkpoint)
waits for the batches of the next k steps, which depend only on weights the trainer has
already published, and saves them with the prompt position after them; a resumed run
trains on the saved batches first and the worker continues from that position, so the
resumed run equals the uninterrupted one. Two cases sample a batch from newer weights than
the schedule's (the worker never has older ones): a run resumed from its last step with
more ``steps``, and a checkpoint written after the worker failed (it holds the batches
that arrived; the run then stops with the worker's error).

The worker is forked from the trainer once the run is built (it starts with the run's
model, prompts and sampler, and opens its own verifier); an exception in it ends the run
with one error naming it, and the worker exits when the trainer does.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.generation import Sampler
from rlvr.rewards import Scorer
from rlvr.train.checkpoint import seed_everything
from rlvr.train.config import TrainConfig
from rlvr.train.interrupt import ResumableError
from rlvr.train.prompts import IndexSampler, Prompt
from rlvr.train.rollout import Rounds, collect_rounds, sequence_logp

POLL_S = 1.0
"""How often a side blocked on the other checks that it is still alive."""


class WorkerError(ResumableError):
    """The generation worker failed or exited; the run stops (``--resume`` continues it)."""


@dataclass
class Generated:
    """One rollout batch from the worker."""

    step: int
    """The step that trains on it."""
    version: int
    """Steps completed by the weights that sampled it."""
    rounds: Rounds
    """Its generation rounds, scored, with behaviour log-probs on the kept rounds."""
    order: dict[str, int]
    """The prompt order's state after drawing it."""
    waited: float
    """Seconds the worker waited for these weights (``time/wait_update``)."""

    @property
    def staleness(self) -> int:
        """Optimiser updates (steps) between the weights that sampled it and those it trains."""
        return self.step - 1 - self.version

    def metrics(self, waited: float) -> dict[str, float]:
        """Staleness and wait metrics; ``waited``: the trainer's wait for it."""
        return {
            # every row of a batch comes from one weight version: mean and max agree per step
            "rollout/staleness_mean": float(self.staleness),
            "rollout/staleness_max": float(self.staleness),
            "time/wait_generation": waited,
            "time/wait_update": self.waited,
        }


class WeightSlots:
    """``count`` copies of a model's weights in shared memory; version ``v`` in slot ``v % count``."""

    def __init__(self, model: torch.nn.Module, count: int) -> None:
        state = model.state_dict()
        self.tensors = [
            {name: t.detach().clone().share_memory_() for name, t in state.items()}
            for _ in range(count)
        ]
        self.versions = torch.full((count,), -1, dtype=torch.long).share_memory_()

    def write(self, model: torch.nn.Module, version: int) -> None:
        """Copy ``model``'s weights in as ``version``."""
        slot = version % len(self.tensors)
        with torch.no_grad():
            for name, t in model.state_dict().items():
                self.tensors[slot][name].copy_(t)
        self.versions[slot] = version

    def read(self, model: torch.nn.Module, version: int) -> None:
        """Load ``version`` into ``model``; an overwritten or missing version is an error."""
        slot = version % len(self.tensors)
        if int(self.versions[slot]) != version:
            raise RuntimeError(
                f"weights of step {version} are not in their slot (it holds step "
                f"{int(self.versions[slot])}): the staleness schedule was broken"
            )
        model.load_state_dict(self.tensors[slot])


def batch_seed(seed: int, step: int) -> int:
    """The RNG seed of the batch trained at ``step``."""
    return (seed * 1_000_033 + step) % 2**63


@dataclass
class _Start:
    """What the worker needs to begin: its first batch, weights and prompt position."""

    first: int
    last: int
    version: int
    order: dict[str, int]


@dataclass
class _Failure:
    """An exception in the worker, for the trainer to raise."""

    summary: str


@dataclass
class _Worker:
    """The worker's share of the run (inherited by fork, never pickled)."""

    cfg: TrainConfig
    policy: Any
    tokenizer: Any
    generator: Sampler
    prompts: list[Prompt]
    open_scorer: Callable[[], Scorer]
    slots: WeightSlots
    threads: int
    parent: int

    def serve(self, commands: Any, results: Any) -> bool:
        """Sample batch after batch on the staleness schedule until the last (``False``) or a
        stop (``True``)."""
        torch.set_num_threads(self.threads)
        start = _receive(commands, self.parent)
        if start is None:
            return True
        k, version, published = self.cfg.rollout.staleness, start.version, start.version
        order = IndexSampler(len(self.prompts), seed=self.cfg.seed, shuffle=self.cfg.data.shuffle)
        order.load_state_dict(start.order)
        scorer = self.open_scorer()
        try:
            for step in range(start.first, start.last + 1):
                need, t0 = max(start.version, step - 1 - k), time.perf_counter()
                while published < need:
                    message = _receive(commands, self.parent)
                    if message is None:
                        return True
                    published = message
                waited = time.perf_counter() - t0
                if version < need:
                    self.slots.read(self.policy, need)
                    self.generator.sync_weights()
                    version = need
                rounds = self.sample(step, scorer, order)
                results.put(_dump(Generated(step, version, rounds, order.state_dict(), waited)))
        finally:
            scorer.close()
        return False

    def sample(self, step: int, scorer, order: IndexSampler) -> Rounds:
        """Batch ``step``'s rounds from the loaded weights, with their behaviour log-probs."""
        seed_everything(batch_seed(self.cfg.seed, step))
        rounds = collect_rounds(
            self.generator, self.tokenizer, scorer, self.prompts, order, self.cfg
        )
        kept = [
            dataclasses.replace(r, behaviour_logp=sequence_logp(self.policy, r.seqs, self.cfg))
            for r in rounds.kept
        ]
        return Rounds(rounds.sampled, kept)


def _receive(commands: Any, parent: int) -> Any:
    """The next command; ``None`` on a stop or when the trainer is gone."""
    while True:
        try:
            return commands.get(timeout=POLL_S)
        except queue.Empty:
            if os.getppid() != parent:
                return None


def _run_worker(worker: _Worker, commands: Any, results: Any) -> None:
    """The worker process: serve on a thread of its own. It ignores Ctrl-C and SIGTERM, which
    the trainer answers (the step in flight may still need a batch:
    :mod:`rlvr.train.interrupt`); the trainer stops it, or it leaves when the trainer is gone.

    OpenMP (libgomp, torch's CPU threads) keeps its thread pool per calling thread, and the
    pool of this process's main thread, inherited by fork, names threads that exist only in
    the trainer: a parallel region on it waits for them forever. A new thread builds a pool of
    its own, so the worker can use more than one thread.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    results.cancel_join_thread()  # never block the exit on a trainer that stopped reading
    thread = threading.Thread(
        target=_serve, args=(worker, commands, results), name="rlvr-generation", daemon=True
    )
    thread.start()
    thread.join()


def _serve(worker: _Worker, commands: Any, results: Any) -> None:
    """Serve, report an exception to the trainer, then stay until the trainer has read it."""
    try:
        if worker.serve(commands, results):
            return
    except BaseException as err:  # noqa: BLE001 - reported to the trainer, which stops the run
        traceback.print_exc(file=sys.stderr)
        results.put(_Failure(f"{type(err).__name__}: {err}"))
    while _receive(commands, worker.parent) is not None:  # until read (or the trainer is gone)
        pass


def _dump(item: Generated) -> bytes:
    """A batch as bytes (tensors copied through the pipe, no shared-memory handles)."""
    buffer = io.BytesIO()
    torch.save(item, buffer)
    return buffer.getvalue()


def _load(data: bytes) -> Generated:
    return torch.load(io.BytesIO(data), weights_only=False)


class RolloutStream:
    """The trainer's end of the worker: batches in step order, weights back after each update.

    It is also the run's data order for checkpoints: its state is the prompt position after
    the last batch received, the batches received but not yet trained on, and the position
    before them (``trained``), to which a resume that may not train them goes back.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        policy,
        tokenizer,
        generator: Sampler,
        prompts: list[Prompt],
        open_scorer: Callable[[], Scorer],
    ) -> None:
        """Fork the worker with the run's ``policy``, ``generator`` and training ``prompts``;
        it scores with a verifier of its own from ``open_scorer``."""
        self.cfg, self.policy = cfg, policy
        self.ahead: deque[Generated] = deque()
        self.order = {"epoch": 0, "position": 0}  # prompt position after the last batch received
        self.trained_order = dict(self.order)  # ... after the last batch trained on
        self.epoch, self.trained = 0, -1  # trained: set by the first step
        self.started = False
        self.failure: WorkerError | None = None  # raised by the next step
        threads, update = cfg.rollout.thread_split(torch.get_num_threads())
        self.slots = WeightSlots(policy, cfg.rollout.staleness + 1)
        context = mp.get_context("fork")  # the worker starts with the run's model and prompts
        self.commands, self.results = context.Queue(), context.Queue()
        worker = _Worker(
            cfg,
            policy,
            tokenizer,
            generator,
            prompts,
            open_scorer,
            self.slots,
            threads,
            os.getpid(),
        )
        self.process = context.Process(
            target=_run_worker, args=(worker, self.commands, self.results), name="rlvr-generation"
        )
        self.process.start()
        torch.set_num_threads(update)

    def next(self, step: int) -> tuple[Rounds, dict[str, float]]:
        """Step ``step``'s rounds and the staleness and wait metrics (starts the worker first)."""
        if self.failure is not None:
            raise self.failure
        if not self.started:
            self._start(step)
        t0 = time.perf_counter()
        while not self.ahead:
            self._take()
        got = self.ahead.popleft()
        self.trained_order = dict(got.order)
        if got.step != step:
            raise WorkerError(
                f"the generation worker sent the batch of step {got.step}, not {step}"
            )
        self.epoch = got.order["epoch"]
        return got.rounds, got.metrics(time.perf_counter() - t0)

    def publish(self) -> None:
        """Hand the weights of the step just trained to the worker."""
        self.trained += 1
        self.slots.write(self.policy, self.trained)
        self.commands.put(self.trained)

    def state_dict(self) -> dict[str, Any]:
        """The prompt position and the batches of the next k steps (waited for: they depend only
        on weights already published)."""
        last = min(self.trained + self.cfg.rollout.staleness, self.cfg.steps)
        try:
            while self.trained + len(self.ahead) < last:
                self._take()
        except WorkerError as err:  # save what arrived; the next step raises
            self.failure = err
        ahead = [_dump(g) for g in self.ahead]
        return {**self.order, "ahead": ahead, "trained": dict(self.trained_order)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (or a synchronous run's prompt position).

        Saved batches staler than this run's ``rollout.staleness`` (a resume that lowered it)
        are dropped with those after them, and their prompts are drawn again."""
        self.order = {"epoch": int(state["epoch"]), "position": int(state["position"])}
        self.ahead = deque(_load(data) for data in state.get("ahead", ()))
        self.trained_order = dict(state.get("trained", self.order))
        bound = self.cfg.rollout.staleness
        kept = deque(itertools.takewhile(lambda got: got.staleness <= bound, self.ahead))
        if len(kept) < len(self.ahead) and "trained" in state:
            self.ahead = kept
            self.order = dict(kept[-1].order) if kept else dict(self.trained_order)
        self.epoch = self.order["epoch"]

    def _start(self, step: int) -> None:
        self.trained, self.started = step - 1, True
        first = step + len(self.ahead)
        self.commands.put(_Start(first, self.cfg.steps, self.trained, dict(self.order)))

    def _take(self) -> None:
        """Wait for the worker's next batch (or its error)."""
        while True:
            try:
                message = self.results.get(timeout=POLL_S)
                break
            except queue.Empty:
                if not self.process.is_alive():
                    raise WorkerError(
                        f"the generation worker exited (code {self.process.exitcode}) "
                        "before sending the next batch"
                    ) from None
        if isinstance(message, _Failure):
            raise WorkerError(f"the generation worker failed: {message.summary}")
        got = _load(message)
        self.ahead.append(got)
        self.order = got.order

    def close(self) -> None:
        """Stop the worker (a stop message, then SIGKILL after a grace period: it ignores
        SIGTERM) and close the queues, so no thread or process of the stream outlives it."""
        if self.process.is_alive():
            self.commands.put(None)
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        # End the commands' feeder thread now, not when the queue is garbage collected: it
        # holds a few small messages at most, which the pipe takes without a reader.
        self.commands.close()
        self.commands.join_thread()
        self.results.close()
