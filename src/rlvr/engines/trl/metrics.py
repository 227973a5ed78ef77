"""rlvr's metrics in TRL's log, reduced over every micro-batch and process of a logging window.

TRL appends its own metrics once per micro-batch and logs their plain mean. rlvr's metrics are
reduced the way ``rlvr train`` reduces them (``docs/metrics.md``), so each means what its name
says: per-token ones are averaged with each micro-batch's response-token count as weight (the
others with the weight :func:`rlvr.objectives.metric_weights` gives them), names
ending in ``max``/``min`` take the max/min, and the quadrant shares are recomputed from the
window's event fractions (:func:`rlvr.train.update.exact_shares`). With equal token counts
everywhere, the weighted mean is the plain one.

Micro-batches only hand their values, device tensors, to a local :class:`MetricWindow`: no
host-device synchronisation and no collective call (so a process whose micro-batch has no
response token makes the same calls as the others). Once per logging step
:meth:`MetricWindow.reduce`, which TRL's ``log`` reaches on every process, copies the window's
values to the host in one transfer, folds them in, and combines the processes.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate.utils import gather_object

from rlvr.train.metrics import StepMetrics
from rlvr.train.update import exact_shares


def _extreme(name: str) -> bool:
    return name.endswith(("max", "min"))


Value = float | torch.Tensor


class MetricWindow(StepMetrics):
    """The metrics of one process's micro-batches since the last log, folded in by
    :class:`~rlvr.train.metrics.StepMetrics`' rule; :meth:`reduce` combines the processes."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: list[tuple[dict[str, Value], Value, dict[str, Value]]] = []

    def add(
        self,
        metrics: dict[str, torch.Tensor],
        weight: Value,
        weights: dict[str, Value] | None = None,
    ) -> None:
        """Keep one micro-batch's metrics until :meth:`reduce` (no host-device sync);
        ``weight`` is its response-token count, ``weights`` those of other units
        (:func:`rlvr.objectives.metric_weight_tensors`)."""
        self._pending.append((dict(metrics), weight, dict(weights or {})))

    def _fold(self) -> None:
        """Fold the kept micro-batches in, their tensors copied to the host in one transfer."""
        tensors = [
            v.detach().double().reshape(())
            for metrics, weight, weights in self._pending
            for v in (*metrics.values(), weight, *weights.values())
            if isinstance(v, torch.Tensor)
        ]
        host = iter(torch.stack(tensors).tolist() if tensors else [])

        def read(values: dict[str, Value]) -> dict[str, float]:
            return {k: next(host) if isinstance(v, torch.Tensor) else v for k, v in values.items()}

        for metrics, weight, weights in self._pending:
            values = read(metrics)
            super().add(values, read({"": weight})[""], read(weights))
        self._pending = []

    def reduce(self, accelerator: Any) -> dict[str, float]:
        """The window's metrics over all processes (collective: every process must call it),
        then empty the window."""
        self._fold()
        names = sorted(set(gather_object([*self._weights, *self._extreme])))
        if not names:  # the same union on every process
            return {}
        rows = [self._row(name) for name in names]  # (weighted sum, weight, signed extreme)
        local = torch.tensor(rows, dtype=torch.float64, device=accelerator.device).view(-1, 3)
        every = accelerator.gather(local[None]).view(-1, len(names), 3)  # [processes, names, 3]
        weighted, weights = every[..., 0].sum(dim=0), every[..., 1].sum(dim=0)
        extremes = every[..., 2].max(dim=0).values
        out = {}
        for i, name in enumerate(names):
            if _extreme(name) and extremes[i] > -torch.inf:
                out[name] = float(extremes[i]) * (1.0 if name.endswith("max") else -1.0)
            elif not _extreme(name) and weights[i] > 0:
                out[name] = float(weighted[i] / weights[i])
        StepMetrics.__init__(self)  # an empty window
        return exact_shares(out)

    def _row(self, name: str) -> tuple[float, float, float]:
        if not _extreme(name):
            return self._weighted.get(name, 0.0), self._weights.get(name, 0.0), -torch.inf
        if name not in self._extreme:
            return 0.0, 0.0, -torch.inf
        value = self._extreme[name]
        return 0.0, 0.0, value if name.endswith("max") else -value
