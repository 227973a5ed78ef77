"""rlvr's metrics in TRL's log, reduced over every micro-batch and process of a logging window.

TRL appends its own metrics once per micro-batch and logs their plain mean. rlvr's metrics are
reduced the way ``rlvr train`` reduces them (``docs/metrics.md``), so each means what its name
says: per-token ones are averaged with each micro-batch's response-token count as weight (the
others with the weight :func:`rlvr.objectives.metric_weights` gives them), names
ending in ``max``/``min`` take the max/min, and the quadrant shares are recomputed from the
window's event fractions (:func:`rlvr.train.update.exact_shares`). With equal token counts
everywhere, the weighted mean is the plain one.

Micro-batches only fold their values into a local :class:`MetricWindow` (no collective call, so
a process whose micro-batch has no response token makes the same calls as the others); the
processes are combined once per logging step, in :meth:`MetricWindow.reduce`, which TRL's
``log`` reaches on every process.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate.utils import gather_object

from rlvr.train.metrics import StepMetrics
from rlvr.train.update import exact_shares


def _extreme(name: str) -> bool:
    return name.endswith(("max", "min"))


class MetricWindow(StepMetrics):
    """The metrics of one process's micro-batches since the last log, folded in by
    :class:`~rlvr.train.metrics.StepMetrics`' rule; :meth:`reduce` combines the processes."""

    def add(
        self,
        metrics: dict[str, torch.Tensor],
        weight: float,
        weights: dict[str, float] | None = None,
    ) -> None:
        """Fold in one micro-batch's metrics; ``weight`` is its response-token count,
        ``weights`` those of other units (:func:`rlvr.objectives.metric_weights`)."""
        names = list(metrics)
        values = torch.stack([metrics[name].detach().double() for name in names]).tolist()
        super().add(dict(zip(names, values, strict=True)), weight, weights)  # one device transfer

    def reduce(self, accelerator: Any) -> dict[str, float]:
        """The window's metrics over all processes (collective: every process must call it),
        then empty the window."""
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
