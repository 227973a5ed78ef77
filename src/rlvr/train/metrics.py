"""Metric writers (``metrics.jsonl``, TensorBoard, optional W&B) and per-step reduction.

Names are the stable list in ``docs/metrics.md``. Every row of ``metrics.jsonl`` is one
JSON object ``{"step": k, "name": value, ...}``; a value that is not finite is written as
``null`` and counted in ``log/nonfinite_metrics``, never as ``NaN``. On resume from step
``k`` the rows after ``k`` are dropped, so the file reads as one uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import math
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from rlvr.atomic import write_text
from rlvr.train.config import LogConfig

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"


def to_float(value: Any) -> float:
    """A Python float from a float, int, bool or 0-dim tensor."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().item())
    return float(value)


def to_host(*groups: Mapping[str, Any]) -> list[dict[str, float]]:
    """Each mapping with its values as Python floats, as :func:`to_float` gives them, the
    tensors among them read in one device-to-host copy per device (one sync, not one per
    value)."""
    tensors: dict[torch.device, list[tuple[int, str, torch.Tensor]]] = {}
    out = [dict(group) for group in groups]
    for i, group in enumerate(out):
        for name, value in group.items():
            if isinstance(value, torch.Tensor):
                tensors.setdefault(value.device, []).append((i, name, value))
            else:
                group[name] = float(value)
    for items in tensors.values():
        flat = torch.stack([v.detach().float().reshape(()) for _, _, v in items]).tolist()
        for (i, name, _), x in zip(items, flat, strict=True):
            out[i][name] = x
    return out


class MetricsWriter:
    """Writes one row of metrics per step to every configured sink."""

    def __init__(
        self, run_dir: Path, cfg: LogConfig, *, resume_step: int | None, config: Mapping[str, Any]
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume_step is not None:
            truncate_after(self.run_dir / METRICS_FILE, resume_step)
            truncate_after(self.run_dir / SAMPLES_FILE, resume_step)
        self._metrics = open(self.run_dir / METRICS_FILE, "a")  # noqa: SIM115 - closed in close()
        self._samples = open(self.run_dir / SAMPLES_FILE, "a")  # noqa: SIM115
        self._tb = _tensorboard(self.run_dir / "tb", resume_step) if cfg.tensorboard else None
        self._wandb = _wandb(cfg, self.run_dir, config) if cfg.wandb else None

    def write(self, step: int, metrics: Mapping[str, Any]) -> dict[str, float | None]:
        """Write ``metrics`` for ``step``; returns the row as written."""
        row: dict[str, float | None] = {}
        bad = 0
        for name, value in metrics.items():
            x = to_float(value)
            finite = math.isfinite(x)
            bad += not finite
            row[name] = x if finite else None
        if bad:
            row["log/nonfinite_metrics"] = float(bad)
        _append(self._metrics, json.dumps({"step": step, **row}) + "\n")
        if self._tb is not None:
            for name, x in row.items():
                if x is not None:
                    self._tb.add_scalar(name, x, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if v is not None}, step=step)
        return row

    def write_samples(self, step: int, samples: Iterable[Mapping[str, Any]]) -> None:
        """Append example completions of ``step`` to ``samples.jsonl``."""
        lines = (json.dumps({"step": step, **sample}, default=str) + "\n" for sample in samples)
        _append(self._samples, "".join(lines))

    def close(self) -> None:
        """Flush and close every sink."""
        for handle in (self._metrics, self._samples):
            with contextlib.suppress(OSError):  # a write that failed was raised by _append,
                handle.close()  # and what it left buffered cannot be written either
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _append(handle, text: str) -> None:
    """Write ``text`` to the open file ``handle`` and flush it; a failure (a full disk) names
    the file, which Python's own error does not."""
    try:
        handle.write(text)
        handle.flush()
    except OSError as err:
        raise OSError(err.errno, err.strerror, handle.name) from err


def read_metrics(path: Path, unread: list[int] | None = None) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` (a torn last line, left by a kill, is ignored); the
    numbers (from 1) of the other lines that are not JSON are appended to ``unread``. A file
    that is not UTF-8 text (a compressed or binary one) is one line naming it."""
    from rlvr.data.loading import decode_text

    rows, bad = [], []
    text = decode_text(Path(path).read_bytes(), str(path), "a metrics.jsonl")
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            bad.append((number, line.endswith("\n")))
    if unread is not None:  # a line with its newline was written whole: not a torn last one
        unread.extend(number for number, whole in bad if whole)
    return rows


def truncate_after(path: Path, step: int) -> None:
    """Rewrite a JSONL file keeping only complete rows with ``row["step"] <= step``."""
    if not path.exists():
        return
    kept = [row for row in read_metrics(path) if row.get("step", 0) <= step]
    write_text(path, "".join(json.dumps(row) + "\n" for row in kept))


def _tensorboard(log_dir: Path, resume_step: int | None):
    from torch.utils.tensorboard import SummaryWriter

    purge = None if resume_step is None else resume_step + 1
    return SummaryWriter(log_dir=str(log_dir), purge_step=purge)


def _wandb(cfg: LogConfig, run_dir: Path, config: Mapping[str, Any]):
    try:
        import wandb
    except ImportError:
        warnings.warn(
            "log.wandb=true but wandb is not installed (pip install wandb); logging without it",
            stacklevel=3,
        )
        return None
    return wandb.init(
        project=cfg.wandb_project,
        dir=str(run_dir),
        config=dict(config),
        name=run_dir.name,
        resume="allow",
    )


class StepMetrics:
    """Accumulates metrics over the micro-batches of a step.

    Per-token objective metrics are averaged with the micro-batch's token count as
    weight, metrics of another unit with the weight ``weights`` gives them
    (:func:`rlvr.objectives.metric_weights`); names ending in ``max``/``min`` take the
    max/min; counts registered with :meth:`add_sum` are summed.
    """

    def __init__(self) -> None:
        self._weighted: dict[str, float] = {}
        self._weights: dict[str, float] = {}
        self._extreme: dict[str, float] = {}
        self._sums: dict[str, float] = {}

    def add(
        self, metrics: Mapping[str, Any], weight: float, weights: Mapping[str, float] | None = None
    ) -> None:
        """Fold in one micro-batch's metrics: ``weight`` (its response tokens) for each, or
        ``weights[name]`` where given."""
        for name, value in metrics.items():
            x = to_float(value)
            if name.endswith(("max", "min")):
                pick = max if name.endswith("max") else min
                self._extreme[name] = pick(self._extreme.get(name, x), x)
            else:
                w = weight if weights is None else weights.get(name, weight)
                self._weighted[name] = self._weighted.get(name, 0.0) + w * x
                self._weights[name] = self._weights.get(name, 0.0) + w

    def add_sum(self, name: str, value: float) -> None:
        """Add ``value`` to a summed metric."""
        self._sums[name] = self._sums.get(name, 0.0) + to_float(value)

    def result(self) -> dict[str, float]:
        """The reduced metrics; a weighted one whose weights are all 0 (``sft/loss`` in a step
        without positive responses) is left out: a mean over nothing has no value."""
        out = {k: v / self._weights[k] for k, v in self._weighted.items() if self._weights[k]}
        out.update(self._extreme)
        out.update(self._sums)
        return out


def peak_gpu_mb(device: torch.device) -> float | None:
    """Peak memory the CUDA caching allocator has handed out on ``device`` in MiB (allocator
    statistics: no synchronisation); ``None`` off CUDA."""
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024
