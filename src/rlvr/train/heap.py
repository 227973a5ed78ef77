"""Give the C heap's free pages back to the operating system before a backward pass.

On CPU, a micro-batch's forward allocates and frees many tensors of one to a few MiB.
glibc serves those from its heap and keeps the pages it got back (resident, counted in
the process's memory) to reuse them, but the backward's allocations do not fit the holes
the forward left, so the heap grows past what is ever live at once. ``malloc_trim(0)``
returns every free page of the heap to the kernel (they read as zeros when touched
again). Called once before each backward pass it lowers the peak resident memory of the
``smollm2-135m`` benchmark step from about 3360 to about 3190 MiB with no slower update
(``bench/memory.py``; docs/benchmarks.md has the measurement). Tensors, values and
gradients are not touched.

Where the C library has no ``malloc_trim`` (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Return the heap's free pages to the OS; True if any were released."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def before_backward(model: torch.nn.Module, enabled: bool) -> None:
    """:func:`release_free_heap` when ``enabled`` and ``model`` runs on the CPU."""
    if enabled and next(model.parameters()).device.type == "cpu":
        release_free_heap()
