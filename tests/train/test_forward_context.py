"""The context of the policy's forward passes: attention off cuDNN, bf16 autocast when asked."""

import torch

from rlvr.train.config import ModelConfig
from rlvr.train.logprobs import forward_context


def test_bf16_autocasts_and_keeps_attention_off_cudnn_inside_only():
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with forward_context(ModelConfig(autocast="bf16", device="cpu")):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert not torch.is_autocast_enabled("cpu")


def test_without_autocast_only_attention_changes_and_an_outer_autocast_stays():
    outer = torch.autocast("cpu", dtype=torch.bfloat16)
    with outer, forward_context(ModelConfig(autocast="none", device="cpu")):
        assert torch.is_autocast_enabled("cpu")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    with forward_context(ModelConfig(autocast="none", device="cpu")):
        assert not torch.is_autocast_enabled("cpu")
    assert torch.backends.cuda.cudnn_sdp_enabled()
