"""The forward-pass context of ``model.autocast``: bf16 autocast with attention off cuDNN."""

import torch

from rlvr.train.config import ModelConfig
from rlvr.train.logprobs import autocast


def test_bf16_autocasts_and_keeps_attention_off_cudnn_inside_only():
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with autocast(ModelConfig(autocast="bf16", device="cpu")):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert not torch.is_autocast_enabled("cpu")


def test_no_autocast_changes_nothing():
    with autocast(ModelConfig(autocast="none", device="cpu")):
        assert not torch.is_autocast_enabled("cpu")
        assert torch.backends.cuda.cudnn_sdp_enabled()
