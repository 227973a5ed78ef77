"""What every policy sampler's ``generate`` sets up around its decoding loop."""

import torch

from rlvr.generation import SamplingConfig
from rlvr.generation.policy import PolicySampler


class _Recording(PolicySampler):
    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        self.cudnn = torch.backends.cuda.cudnn_sdp_enabled()
        self.modes = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        return torch.full((prompt_ids.shape[0], 1), padding)


def test_samplers_draw_with_attention_off_cudnn(tiny_model):
    model, tokenizer = tiny_model
    sampler = _Recording(model, tokenizer, None)
    sampler.generate([[1, 2, 3]], n=2, sampling=SamplingConfig(max_new_tokens=1))
    assert sampler.cudnn is False
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_samplers_draw_in_inference_mode_and_under_autocast_without_gradients(tiny_model):
    """Autocast keeps its cast of a trainable weight for the whole call only outside
    inference mode; without autocast, inference mode is the cheaper of the two."""
    model, tokenizer = tiny_model
    sampler = _Recording(model, tokenizer, None)
    sampler.generate([[1, 2, 3]], n=2, sampling=SamplingConfig(max_new_tokens=1))
    assert sampler.modes == (True, False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sampler.generate([[1, 2, 3]], n=2, sampling=SamplingConfig(max_new_tokens=1))
    assert sampler.modes == (False, False)


def test_the_hf_sampler_under_autocast_casts_each_weight_once_a_call(tiny_model):
    from tests.test_fast_decode import _Casts

    from rlvr.generation.hf import HFOptions, HFSampler

    model, tokenizer = tiny_model
    linear = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    sampler = HFSampler(model, tokenizer, HFOptions())
    sampling = SamplingConfig(max_new_tokens=6, temperature=0.0)
    with torch.autocast("cpu", dtype=torch.bfloat16), _Casts() as casts:
        gen = sampler.generate([[1, 2, 3]], n=2, sampling=sampling)
    assert gen.response_mask.sum(1).min() >= 3  # decoding steps that would each cast again
    weight_casts = sum(shape in {w.shape for w in linear} for shape in casts.shapes)
    assert 0 < weight_casts <= len(linear)
