"""The fingerprint of a model's weights that evaluation reports record."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from rlvr.models import load_model
from rlvr.models.fingerprint import weights_sha256


def test_the_same_values_hash_alike_in_any_precision_and_a_changed_one_does_not(tiny_model_dir):
    """Half precision is widened exactly before hashing: a bfloat16 checkpoint loaded in
    float32 is the same weights (its dtype is a setting of its own); one value changed by
    the smallest step is other weights."""
    model, _ = load_model(str(tiny_model_dir), dtype="bfloat16")
    digest = weights_sha256(model)
    model.float()  # in place: the same values, exactly
    assert next(model.parameters()).dtype == torch.float32
    assert weights_sha256(model) == digest
    with torch.no_grad():
        weight = next(model.parameters())
        weight[0, 0] = torch.nextafter(weight[0, 0], weight[0, 0] + 1)
    assert weights_sha256(model) != digest


def test_a_copy_of_the_weights_elsewhere_hashes_alike(tiny_model_dir, tmp_path):
    """Not the path: the same weights saved elsewhere (one file or shards) are the same."""
    model, _ = load_model(str(tiny_model_dir))
    model.save_pretrained(tmp_path / "sharded", max_shard_size="100KB")
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "sharded")
    assert weights_sha256(loaded) == weights_sha256(model)


def test_a_policy_with_adapters_hashes_as_the_merged_model_its_checkpoint_holds(tiny_model_dir):
    """A run's policy carries LoRA adapters; its reports' fingerprint is that of the merged
    model its checkpoint saves (and rlvr eval of the checkpoint loads)."""
    pytest.importorskip("peft")
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import add_adapters, merged_state_dict

    policy, _ = load_model(str(tiny_model_dir))
    before = weights_sha256(policy)
    add_adapters(policy, LoraConfig(rank=2, targets=("q_proj",)))
    assert weights_sha256(policy) == before  # B = 0: the model is unchanged
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if ".lora_B." in name:
                p.normal_(0, 0.1)
    plain, _ = load_model(str(tiny_model_dir))
    plain.load_state_dict(merged_state_dict(policy))
    assert weights_sha256(policy) == weights_sha256(plain) != before
