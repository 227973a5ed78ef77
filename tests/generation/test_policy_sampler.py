"""What every policy sampler's ``generate`` sets up around its decoding loop."""

import torch

from rlvr.generation import SamplingConfig
from rlvr.generation.policy import PolicySampler


class _Recording(PolicySampler):
    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        self.cudnn = torch.backends.cuda.cudnn_sdp_enabled()
        return torch.full((prompt_ids.shape[0], 1), padding)


def test_samplers_draw_with_attention_off_cudnn(tiny_model):
    model, tokenizer = tiny_model
    sampler = _Recording(model, tokenizer, None)
    sampler.generate([[1, 2, 3]], n=2, sampling=SamplingConfig(max_new_tokens=1))
    assert sampler.cudnn is False
    assert torch.backends.cuda.cudnn_sdp_enabled()
