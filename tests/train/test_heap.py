"""rlvr.train.heap: free heap pages go back to the OS, only where asked and on the CPU."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

import pytest
import torch

from rlvr.train import heap

needs_glibc = pytest.mark.skipif(heap._malloc_trim() is None, reason="no malloc_trim")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@needs_glibc
@pytest.mark.skipif(
    any(k.startswith("MALLOC_") for k in os.environ), reason="glibc tuned by the environment"
)
def test_release_returns_freed_heap_pages_to_the_os():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block, count = 64 * 1024, 1024  # 64 MiB in blocks below any mmap threshold: heap
    blocks = [libc.malloc(block) for _ in range(count)]
    for b in blocks:
        ctypes.memset(b, 1, block)  # resident
    # Every other block freed: 32 MiB of holes that cannot merge into the heap's top, so
    # free() alone keeps them resident, as it keeps the holes a forward pass leaves.
    for b in blocks[::2]:
        libc.free(b)
    before = _rss_mib()
    assert heap.release_free_heap()
    after = _rss_mib()
    for b in blocks[1::2]:
        libc.free(b)
    assert before - after > 24, (before, after)


def test_before_backward_trims_only_when_enabled_on_cpu(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "release_free_heap", lambda: calls.append(1) or True)
    on_cpu, elsewhere = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2, device="meta")
    heap.before_backward(on_cpu, True)
    heap.before_backward(on_cpu, False)
    heap.before_backward(elsewhere, True)  # a device other than the CPU (a GPU's heap is not C's)
    assert len(calls) == 1


def test_no_malloc_trim_means_nothing_released(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.release_free_heap() is False
