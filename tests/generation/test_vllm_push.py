"""How the ``vllm`` sampler hands the policy's weights to its engine (any environment: the
engine is a stand-in that records what it reads)."""

from __future__ import annotations

import pytest
import torch

from rlvr.generation import vllm as vllm_sampler
from rlvr.ops import merged


class _Engine:
    """Records the order of merges and loads; the real engine loads in ``load_weights``."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def collective_rpc(self, fn, args):
        (weights,) = args
        for name, _ in weights:
            self.events.append(f"load {name}")

    def reset_prefix_cache(self) -> None:
        self.events.append("reset")


def test_each_merged_weight_is_made_when_the_engine_reads_it(tiny_model, monkeypatch):
    pytest.importorskip("peft")
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import add_adapters

    model, _ = tiny_model
    add_adapters(model, LoraConfig(rank=2))
    events: list[str] = []
    merge = merged.merged_weight

    def recorded(layer):
        events.append("merge")
        return merge(layer)

    monkeypatch.setattr(merged, "merged_weight", recorded)
    sampler = vllm_sampler.VllmSampler.__new__(vllm_sampler.VllmSampler)
    sampler.model, sampler.llm, sampler.threads = model, _Engine(events), torch.get_num_threads()
    sampler._stale = vllm_sampler.StaleWeights(model)
    sampler.sync_weights()
    merges = [i for i, e in enumerate(events) if e == "merge"]
    assert len(merges) >= 2 and events[-1] == "reset"
    for i in merges:  # the engine loads each merged weight before the next is made
        assert events[i + 1].startswith("load ") and ".base_layer" not in events[i + 1]
    assert not any(".lora_" in e for e in events)
