"""An interrupted ``rlvr eval`` continues where it stopped.

After every batch of prompts the completions sampled so far and the sampling RNG's state after
them are written (atomically) beside the output file. The same command run again restores
both and samples the remaining batches, so its completions, and every number of the report,
equal those of an uninterrupted run. The file names the settings it was made with: other
settings (another model, data set, ``-n``, seed, ...) are refused, not mixed in.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rlvr.atomic import atomic_path

SUFFIX = ".partial.pt"


def partial_path(output: Path) -> Path:
    """Where the partial samples of an evaluation writing ``output`` are kept."""
    return output.with_name(output.stem + SUFFIX)


class PartialSamples:
    """The completions of the batches sampled so far (``texts``, ``lengths``, ``truncated``)
    and the RNG state after them, for an evaluation made with ``settings``."""

    def __init__(self, path: Path, settings: Mapping[str, Any]) -> None:
        self.path = path
        self.settings = dict(settings)
        self.kept = 0
        """Completions in the file, as the last :meth:`load` or :meth:`save` left it."""
        self._loaded: tuple[dict[str, list], dict[str, Any]] | None = None

    def load(self) -> tuple[dict[str, list], dict[str, Any]] | None:
        """``(samples, rng_state)`` kept, or None when nothing is; ValueError (one line) when
        the file is damaged or was made with other settings. The file is read once."""
        if self._loaded is None and self.path.exists():
            self._loaded = self._read()
            self.kept = len(self._loaded[0]["texts"])
        return self._loaded

    def _read(self) -> tuple[dict[str, list], dict[str, Any]]:
        try:
            saved = torch.load(self.path, weights_only=True)
        except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
            raise ValueError(f"{self.path}: unreadable ({err}); delete it to start over") from None
        if saved.get("settings") != self.settings:
            changed = sorted(
                k
                for k in self.settings.keys() | saved.get("settings", {}).keys()
                if self.settings.get(k) != saved.get("settings", {}).get(k)
            )
            raise ValueError(
                f"{self.path}: an interrupted evaluation with other settings ({', '.join(changed)}); "
                "run it with its own, or delete the file, or choose another --output"
            )
        return saved["samples"], saved["rng"]

    def save(self, samples: Mapping[str, list], rng: dict[str, Any]) -> None:
        """Keep ``samples`` and the RNG state after them (the file is whole or absent)."""
        data = {"settings": self.settings, "samples": dict(samples), "rng": rng}
        with atomic_path(self.path) as tmp:
            torch.save(data, tmp)
        self._loaded, self.kept = (data["samples"], rng), len(samples["texts"])

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self._loaded, self.kept = None, 0


def rng_state(devices: list[int]) -> dict[str, Any]:
    """The torch RNG state of the CPU and of the CUDA ``devices``."""
    return {"cpu": torch.get_rng_state(), "cuda": [torch.cuda.get_rng_state(d) for d in devices]}


def set_rng_state(state: dict[str, Any], devices: list[int]) -> None:
    """Restore what :func:`rng_state` returned (on the same devices)."""
    torch.set_rng_state(state["cpu"])
    for device, cuda in zip(devices, state["cuda"], strict=True):
        torch.cuda.set_rng_state(cuda, device)
