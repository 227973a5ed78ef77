"""The end of an assistant turn, read from each family's chat template: sampling stops on it,
a completion ending with it is not truncated, and the verifier's text leaves it out."""

from __future__ import annotations

import warnings

import pytest
import torch
from tests.chat_families import FAMILIES, GRANITE_CODE, family_tokenizer

from rlvr.generation import SamplingConfig
from rlvr.generation.base import eos_ids
from rlvr.generation.policy import PolicySampler

REFUSES = "{{ raise_exception('no assistant turns here') }}"


def _model(tokenizer):
    """A random tiny model over ``tokenizer``, its generation config listing the EOS only
    (as Gemma's first release did: ``<end_of_turn>`` was not in it)."""
    from rlvr.models.tiny import TinySize, random_model

    return random_model(tokenizer, TinySize(hidden_size=16, num_heads=2, intermediate_size=32))


class _Fixed(PolicySampler):
    """Samples the rows it is given, whatever the model."""

    rows: list[list[int]] = []

    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        return torch.tensor(self.rows)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_sampling_stops_on_the_templates_end_of_turn(name):
    tokenizer = family_tokenizer(name)
    end = tokenizer.convert_tokens_to_ids(FAMILIES[name].end_of_turn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a family's end is found, not fallen back from
        stops = eos_ids(_model(tokenizer), tokenizer)
    assert stops[0] == tokenizer.eos_token_id  # the generation config's, first as before
    assert end in stops and len(set(stops)) == len(stops)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_completion_ending_its_turn_is_not_truncated_and_the_verifier_reads_no_end(name):
    tokenizer = family_tokenizer(name)
    family = FAMILIES[name]
    end = tokenizer.convert_tokens_to_ids(family.end_of_turn)
    answer = tokenizer("The answer is 19.", add_special_tokens=False)["input_ids"][:3]
    sampler = _Fixed(_model(tokenizer), tokenizer, None)
    sampler.rows = [[*answer, end, answer[0]], [*answer, *answer[:2]]]
    gen = sampler.generate([[5, 6]], n=2, sampling=SamplingConfig(max_new_tokens=5))
    assert gen.truncated.tolist() == [False, True]
    assert gen.response_mask.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert gen.texts[0] == tokenizer.decode(answer) != ""
    assert family.end_of_turn not in gen.texts[0]


def test_an_end_of_turn_the_tokenizer_does_not_mark_special_is_left_out_of_the_text():
    """A tokenizer may hold its end-of-turn token (here Phi-3's ``<|end|>``) as a plain added
    token: decoding without special tokens kept it, and the verifier read ``19<|end|>``."""
    from tests.chat_families import PHI3, WORDS

    from rlvr.models.tiny import build_tokenizer

    tokenizer = build_tokenizer(WORDS * 20, vocab_size=300)
    tokenizer.add_special_tokens({"eos_token": "<|endoftext|>", "bos_token": "<s>"})
    tokenizer.add_tokens(["<|user|>", "<|assistant|>", "<|end|>"])
    tokenizer.chat_template = PHI3
    end = tokenizer.convert_tokens_to_ids("<|end|>")
    nineteen = tokenizer("19", add_special_tokens=False)["input_ids"]
    sampler = _Fixed(_model(tokenizer), tokenizer, None)
    sampler.rows = [[*nineteen, end, nineteen[0]]]
    gen = sampler.generate([[5, 6]], n=1, sampling=SamplingConfig(max_new_tokens=4))
    assert gen.texts == ["19"] and gen.truncated.tolist() == [False]


@pytest.mark.parametrize(
    ("template", "why"),
    [(GRANITE_CODE, "writes '\\n\\nQuestion:"), (REFUSES, "refused a user/assistant/user")],
)
def test_a_template_with_no_end_token_falls_back_to_the_eos_in_one_line(template, why):
    from rlvr.generation.turns import end_of_turn

    tokenizer = family_tokenizer("phi-3", template)
    with pytest.warns(UserWarning) as caught:
        assert end_of_turn(tokenizer) == tokenizer.eos_token_id
    (line,) = [str(w.message) for w in caught]
    assert why in line and "the EOS token '<|endoftext|>' is taken as its end" in line
    assert "\n" not in line
    with warnings.catch_warnings():  # said once per tokenizer (rlvr sft said it twice)
        warnings.simplefilter("error")
        assert eos_ids(_model(tokenizer), tokenizer) == [tokenizer.eos_token_id]
    with pytest.warns(UserWarning, match="is taken as its end"):  # another tokenizer: again
        other = family_tokenizer("phi-3", template)
        assert eos_ids(_model(other), other) == [other.eos_token_id]


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{{ 1 / 0 }}", "ZeroDivisionError: division by zero"),
        ("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", "RecursionError: maximum"),
    ],
)
def test_a_template_that_fails_in_python_falls_back_to_the_eos_in_one_line(template, why):
    """A template's error other than jinja's (a division by zero, endless recursion) was a
    traceback out of every command that samples or builds SFT targets."""
    from rlvr.generation.turns import end_of_turn

    tokenizer = family_tokenizer("phi-3", template)
    with pytest.warns(UserWarning, match=f"refused a user/assistant/user conversation: {why}"):
        assert end_of_turn(tokenizer) == tokenizer.eos_token_id


def test_without_an_eos_the_fallback_says_no_token_ends_the_turn():
    """The warning said ``the EOS token None is taken as its end``."""
    from rlvr.generation.turns import end_of_turn

    tokenizer = family_tokenizer("phi-3", GRANITE_CODE)
    tokenizer.eos_token = None
    with pytest.warns(UserWarning) as caught:
        assert end_of_turn(tokenizer) is None
    (line,) = [str(w.message) for w in caught]
    assert line.endswith("no token is taken as its end: the tokenizer has no EOS token either")
    assert "None" not in line


def test_no_chat_template_ends_at_the_eos_without_a_word():
    from rlvr.generation.turns import end_of_turn

    tokenizer = family_tokenizer("gemma")
    tokenizer.chat_template = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert end_of_turn(tokenizer) == tokenizer.eos_token_id


def test_the_tiny_presets_turn_ends_at_its_eos_and_its_stop_ids_are_unchanged(tiny_model):
    """The ``tiny`` preset's tokenizer (and SmolLM2's, above) ends a turn with its EOS
    ``<|im_end|>``: the same one stop id as before, so measured numbers do not move."""
    from rlvr.generation.turns import end_of_turn

    model, tokenizer = tiny_model
    assert (
        end_of_turn(tokenizer)
        == tokenizer.eos_token_id
        == tokenizer.convert_tokens_to_ids("<|im_end|>")
    )
    assert eos_ids(model, tokenizer) == [tokenizer.eos_token_id]
