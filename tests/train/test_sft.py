import copy
import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
import torch
from tests.chat_families import FAMILIES, family_tokenizer

from rlvr.data import format_prompt
from rlvr.train.batch import pack
from rlvr.train.config import ModelConfig, OptimConfig, SFTConfig, SFTDataConfig
from rlvr.train.metrics import read_metrics
from rlvr.train.prompts import load_sft_examples, read_examples
from rlvr.train.supervised import eval_nll, sft, sft_step


def _pairs_file(tmp_path: Path, rows: list[dict]) -> Path:
    """``tmp_path / pairs.jsonl`` holding ``rows``, one JSON object a line."""
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cfg(tiny_model_dir, sft_file, out, **kw):
    base = dict(
        epochs=4,
        batch_size=3,
        model=ModelConfig(name=str(tiny_model_dir)),
        data=SFTDataConfig(train=sft_file, eval=sft_file),
        optim=OptimConfig(lr=3e-3, max_grad_norm=1.0),
        log={"output_dir": str(out), "tensorboard": False, "progress": "off"},
    )
    base.update(kw)
    from rlvr.train.config import LogConfig

    if isinstance(base["log"], dict):
        base["log"] = LogConfig(**base["log"])
    return SFTConfig(**base)


def test_sft_lowers_held_out_nll_and_writes_metrics(tiny_model_dir, sft_file, tmp_path):
    result = sft(_cfg(tiny_model_dir, sft_file, tmp_path / "run"))
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    # step 0: the held-out NLL before training; then 4 epochs x ceil(6 / 3) steps
    assert [r["step"] for r in rows] == list(range(0, 9))
    evals = [r["sft/eval_loss"] for r in rows if "sft/eval_loss" in r]
    assert len(evals) == 5 and evals[-1] < evals[1] < evals[0]
    assert all(r["sft/tokens"] > 0 and r["optim/lr"] == pytest.approx(3e-3) for r in rows[1:])
    assert result.model_dir is not None and (result.model_dir / "config.json").exists()


def test_the_held_out_nll_before_training_is_the_step_0_row(
    tiny_model_dir, tiny_model, sft_file, tmp_path
):
    """As ``rlvr train`` evaluates before training (``eval.at_start``), ``rlvr sft`` writes the
    untrained model's held-out NLL as step 0: plain cross_entropy over the held-out responses
    (one unpadded sequence each); ``eval.at_start=false`` leaves it out, as without data.eval."""
    from rlvr.models import load_model
    from rlvr.train.config import SFTEvalConfig

    held_out = tmp_path / "held.jsonl"
    pairs = [{"prompt": "What is 9 + 1?", "response": "9 + 1 = 10. Answer: 10"}]
    pairs.append({"prompt": "Name a colour.", "response": "Blue, the colour of the sky."})
    held_out.write_text("".join(json.dumps(r) + "\n" for r in pairs))
    data = SFTDataConfig(train=sft_file, eval=str(held_out))
    result = sft(_cfg(tiny_model_dir, sft_file, tmp_path / "run", epochs=1, data=data))
    first = read_metrics(result.run_dir / "metrics.jsonl")[0]
    examples, _ = load_sft_examples(str(held_out), tiny_model[1], data, limit=None)
    with torch.no_grad():
        expected = float(_hand_nll(load_model(str(tiny_model_dir))[0], examples))
    assert set(first) == {"step", "sft/eval_loss"} and first["step"] == 0
    assert first["sft/eval_loss"] == pytest.approx(expected, rel=1e-5)
    assert result.evals[0] == {"eval_loss": first["sft/eval_loss"]}
    assert sorted(result.evals) == [0, 2]
    drop = ("time/", "perf/")
    steps = [
        {k: v for k, v in r.items() if not k.startswith(drop)}
        for r in read_metrics(result.run_dir / "metrics.jsonl")[1:]
    ]
    for off in (
        {"data": data, "eval": SFTEvalConfig(at_start=False)},
        {"data": SFTDataConfig(train=sft_file)},
    ):
        again = sft(_cfg(tiny_model_dir, sft_file, tmp_path / f"off{len(off)}", epochs=1, **off))
        rows = read_metrics(again.run_dir / "metrics.jsonl")
        assert rows[0]["step"] == 1 and 0 not in again.evals
        if "eval" in off:  # measuring before training changes nothing of the training
            assert [{k: v for k, v in r.items() if not k.startswith(drop)} for r in rows] == steps
            a, b = (load_model(str(r.model_dir))[0].state_dict() for r in (result, again))
            assert all(torch.equal(value, b[name]) for name, value in a.items())


def test_sft_loss_masks_prompt_tokens(tiny_model):
    model, tokenizer = tiny_model
    cfg = SFTConfig(model=ModelConfig(), data=SFTDataConfig(train="x"), batch_size=2)
    batch = pack([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]], tokenizer.pad_token_id)
    # Hand computation: full forward, NLL of the response tokens only.
    pos = (batch.attention_mask.cumsum(-1) - 1).clamp_min(0)
    logits = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=pos
    ).logits
    logprobs = logits.log_softmax(-1)
    rows = [
        (0, [3, 4], [9, 10]),
        (1, [3, 4, 5], [11, 12, 13]),
    ]  # response columns in the 6-wide batch
    nll = [
        -logprobs[i, c - 1, t] for i, cols, toks in rows for c, t in zip(cols, toks, strict=True)
    ]
    expected = torch.stack(nll).mean()
    assert eval_nll(model, batch, cfg) == pytest.approx(float(expected.detach()), rel=1e-5)


def test_micro_batched_sft_step_equals_full_batch(tiny_model_dir, sft_file, tmp_path):
    from rlvr.train.optim import build_optimizer
    from rlvr.train.policy import load_policy

    results = []
    for micro in (None, 2):
        # eps=1 makes Adam's first step smooth in the gradient (lr * g / (|g| + 1)), so
        # float-level gradient differences cannot flip the sign of near-zero updates.
        optim = OptimConfig(lr=1e-2, eps=1.0, micro_batch_size=micro)
        cfg = _cfg(tiny_model_dir, sft_file, tmp_path / f"r{micro}", batch_size=6, optim=optim)
        model, tokenizer = load_policy(cfg.model)
        examples, _ = load_sft_examples(sft_file, tokenizer, cfg.data, limit=None)
        batch = pack(
            [e.prompt_ids for e in examples],
            [e.response_ids for e in examples],
            tokenizer.pad_token_id,
        )
        optimizer, scheduler = build_optimizer(model, cfg.optim, 1)
        metrics = sft_step(model, optimizer, scheduler, batch, cfg)
        results.append((metrics, copy.deepcopy(model.state_dict())))
    (m_full, p_full), (m_micro, p_micro) = results
    assert m_micro["sft/loss"] == pytest.approx(m_full["sft/loss"], rel=1e-5)
    assert m_micro["optim/grad_norm"] == pytest.approx(m_full["optim/grad_norm"], rel=1e-4)
    for name, value in p_full.items():
        torch.testing.assert_close(p_micro[name], value, rtol=1e-5, atol=1e-7)
    changed = any(
        not torch.equal(p_full[n], v) for n, v in tiny_model_weights(tiny_model_dir).items()
    )
    assert changed


def tiny_model_weights(path):
    from rlvr.models import load_model

    return load_model(str(path))[0].state_dict()


def test_sft_resume_continues_exactly(tiny_model_dir, sft_file, tmp_path):
    from rlvr.train.config import CheckpointConfig

    full = sft(_cfg(tiny_model_dir, sft_file, tmp_path / "full"))
    first = _cfg(
        tiny_model_dir,
        sft_file,
        tmp_path / "cut",
        epochs=2,
        checkpoint=CheckpointConfig(every=1, keep_last=1),
    )
    sft(first)
    second = _cfg(
        tiny_model_dir,
        sft_file,
        tmp_path / "cut",
        checkpoint=CheckpointConfig(every=1, keep_last=1),
    )
    sft(second, resume=True)
    a = read_metrics(full.run_dir / "metrics.jsonl")
    b = read_metrics(tmp_path / "cut" / "metrics.jsonl")
    drop = ("time/", "perf/")
    clean = [{k: v for k, v in r.items() if not k.startswith(drop)} for r in a]
    # epochs changes the cosine/constant schedule length only; the constant LR makes runs comparable
    assert [json.dumps(r, sort_keys=True) for r in clean] == [
        json.dumps({k: v for k, v in r.items() if not k.startswith(drop)}, sort_keys=True)
        for r in b
    ]


def test_rl_starts_from_an_sft_checkpoint(tiny_model_dir, sft_file, tmp_path, train_config):
    from rlvr.train.loop import train

    warm = sft(_cfg(tiny_model_dir, sft_file, tmp_path / "warm", epochs=1))
    result = train(train_config(f"model.name={warm.model_dir}", "steps=1", out="rl-from-sft"))
    assert read_metrics(result.run_dir / "metrics.jsonl")[0]["step"] == 1


def test_sft_steps_override_epochs(tiny_model_dir, sft_file, tmp_path):
    result = sft(_cfg(tiny_model_dir, sft_file, tmp_path / "steps", epochs=1, steps=5))
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]  # step 0: the NLL before training
    # 6 pairs, batches of 3: wraps into epoch 1 and 2
    assert [r["data/epoch"] for r in rows[1:]] == [0.0, 0.0, 1.0, 1.0, 2.0]


def test_resume_with_more_steps_follows_the_new_schedule(tiny_model_dir, sft_file, tmp_path):
    """``--resume DIR steps=N`` extends the LR schedule to N steps: the checkpoint's schedule
    ended at 4, and its cosine gave lr 0 to every step after."""
    optim = OptimConfig(lr=1e-3, schedule="cosine", max_grad_norm=1.0)
    short = _cfg(tiny_model_dir, sft_file, tmp_path / "run", steps=4, optim=optim)
    sft(short)
    longer = sft(dataclasses.replace(short, steps=8), resume=True)
    lrs = [r["optim/lr"] for r in read_metrics(longer.run_dir / "metrics.jsonl")[1:]]
    expected = [1e-3 * 0.5 * (1 + math.cos(math.pi * s / 8)) for s in range(8)]
    assert lrs[4:] == pytest.approx(expected[4:], rel=1e-9)


def test_epochs_are_exact_passes_when_the_batch_does_not_divide_the_data(
    tiny_model_dir, tiny_model, sft_file, tmp_path
):
    """7 pairs in batches of 3: each pass is 3 steps (3 + 3 + 1 pairs) over every pair once,
    the held-out NLL comes at the end of each pass, and a run of 2 epochs makes 2 passes."""
    path = tmp_path / "seven.jsonl"
    extra = {"prompt": "What is 9 + 1?", "response": "9 + 1 = 10. Answer: 10"}
    path.write_text(Path(sft_file).read_text() + json.dumps(extra) + "\n")
    cfg = _cfg(tiny_model_dir, str(path), tmp_path / "run", epochs=2)
    examples, _ = load_sft_examples(str(path), tiny_model[1], cfg.data, limit=None)
    all_tokens = sum(len(e.response_ids) for e in examples)
    rows = read_metrics(sft(cfg).run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows if "sft/eval_loss" in r] == [0, 3, 6]  # 0: before training
    rows = rows[1:]
    assert [r["data/epoch"] for r in rows] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert sum(r["sft/tokens"] for r in rows[:3]) == all_tokens
    assert sum(r["sft/tokens"] for r in rows[3:]) == all_tokens


def test_a_run_of_steps_evaluates_where_each_pass_ends(tiny_model_dir, sft_file, tmp_path):
    """7 pairs in full batches of 3 that wrap into the next pass: the 7th, 14th and 21st pairs
    drawn (the ends of the passes) come in steps 3, 5 and 7. The held-out NLL came every
    ceil(7 / 3) = 3 steps instead (3, 6, 9), mid-pass from the second on."""
    path = tmp_path / "seven.jsonl"
    extra = {"prompt": "What is 9 + 1?", "response": "9 + 1 = 10. Answer: 10"}
    path.write_text(Path(sft_file).read_text() + json.dumps(extra) + "\n")
    cfg = _cfg(tiny_model_dir, str(path), tmp_path / "run", epochs=1, steps=10)
    rows = read_metrics(sft(cfg).run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows if "sft/eval_loss" in r] == [0, 3, 5, 7, 10]


def test_held_out_pairs_with_a_training_prompt_are_warned(tiny_model_dir, sft_file, tmp_path):
    """sft/eval_loss on pairs the run trains on (data.eval = data.train, as a quick run might
    set it) read as a held-out NLL with no word of it; RL warns of shared prompts."""
    path = tmp_path / "held.jsonl"
    rows = [
        {"prompt": "What is 12 + 7?", "response": "12 + 7 = 19. Answer: 19"},  # a training pair
        {"prompt": "What is 5 - 3?", "response": "2"},  # a training prompt, another response
        {"prompt": "What is 9 + 1?", "response": "9 + 1 = 10. Answer: 10"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = SFTDataConfig(train=sft_file, eval=str(path))
    cfg = _cfg(tiny_model_dir, sft_file, tmp_path / "run", epochs=1, data=data)
    message = (
        r"data\.eval: 2 of 3 held-out pairs have a training prompt \(data\.train; 1 the "
        r"training response too\): sft/eval_loss is not held-out on them"
    )
    with pytest.warns(UserWarning, match=message):
        sft(cfg)


@pytest.mark.parametrize(
    "response",
    [
        [{"role": "assistant", "content": "4"}, {"role": "assistant", "content": "5"}],
        [{"role": "user", "content": "4"}],
        {"text": "4"},
    ],
)
def test_a_response_that_is_not_text_names_file_and_line(tiny_model, tmp_path, response):
    """A list or mapping would otherwise be trained on as its Python repr (one assistant
    message is read as its text: see below)."""
    rows = [{"prompt": "2+2?", "response": "4"}, {"prompt": "2+2?", "response": response}]
    path = _pairs_file(tmp_path, rows)
    cfg = SFTDataConfig(train=str(path))
    with pytest.raises(ValueError, match=r"pairs\.jsonl:2: field 'response' .* must be text"):
        load_sft_examples(str(path), tiny_model[1], cfg, limit=None)


def test_a_numeric_response_is_its_digits(tiny_model, tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"prompt": "2+2?", "response": 4}) + "\n")
    tokenizer = tiny_model[1]
    (example,), _ = load_sft_examples(
        str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None
    )
    assert tokenizer.decode(example.response_ids) == "4" + tokenizer.eos_token


def test_a_response_ending_with_the_eos_text_gets_one_eos(tiny_model, tmp_path):
    """Responses exported from a chat template often end with its EOS string (``<|im_end|>``):
    that token must not be appended again (the model would learn EOS after EOS)."""
    tokenizer = tiny_model[1]
    rows = [
        {"prompt": "2+2?", "response": "4" + tokenizer.eos_token},
        {"prompt": "1+1?", "response": "2"},
    ]
    path = _pairs_file(tmp_path, rows)
    examples, _ = load_sft_examples(
        str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None
    )
    eos = tokenizer.eos_token_id
    assert [e.response_ids.count(eos) for e in examples] == [1, 1]
    assert all(e.response_ids[-1] == eos for e in examples)


@pytest.mark.parametrize("after", ["\n", " \n\n"])
def test_whitespace_after_a_final_eos_text_is_dropped_not_followed_by_a_second_eos(
    tiny_model, tmp_path, after
):
    """A response copied out of a chat-templated conversation ends ``<|im_end|>\\n`` (the
    template's newline after the turn): the target is the text and ONE EOS, not EOS, newline,
    EOS (generation stops at the first EOS, so the newline is never produced). A response
    that ends with a newline of its own and no EOS keeps it before the appended EOS."""
    tokenizer = tiny_model[1]
    eos = tokenizer.eos_token_id
    rows = [
        {"prompt": "2+2?", "response": "4" + tokenizer.eos_token + after},
        {"prompt": "1+1?", "response": "2" + after},
    ]
    path = _pairs_file(tmp_path, rows)
    examples, _ = load_sft_examples(
        str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None
    )
    ids = tokenizer(["4", "2" + after], add_special_tokens=False)["input_ids"]
    assert [list(e.response_ids) for e in examples] == [[*ids[0], eos], [*ids[1], eos]]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_sft_targets_end_with_the_token_the_chat_template_ends_a_turn_with(tmp_path, name):
    """Gemma ends a turn with ``<end_of_turn>`` (EOS ``<eos>``), Llama 3 with ``<|eot_id|>``
    (the 3.0 release's EOS ``<|end_of_text|>``), Phi-3 with ``<|end|>`` (EOS
    ``<|endoftext|>``): the response ends with that token once, as the model writes it at
    inference, also when the data already ends with it and the template's newline."""
    tokenizer = family_tokenizer(name)
    end_text = FAMILIES[name].end_of_turn
    end = tokenizer.convert_tokens_to_ids(end_text)
    rows = [
        {"prompt": "What is 12 + 7?", "response": "19"},
        {"prompt": "What is 12 + 7?", "response": "19" + end_text + "\n"},
    ]
    path = _pairs_file(tmp_path, rows)
    examples, _ = load_sft_examples(
        str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None
    )
    nineteen = tokenizer("19", add_special_tokens=False)["input_ids"]
    assert [list(e.response_ids) for e in examples] == [[*nineteen, end]] * 2
    prompt = tokenizer(format_prompt(tokenizer, "What is 12 + 7?"), add_special_tokens=False)
    assert list(examples[0].prompt_ids) == prompt["input_ids"]


@pytest.mark.parametrize("after", ["", "\n"])
def test_a_response_ending_with_the_eos_where_the_turn_ends_otherwise_keeps_it(tmp_path, after):
    """Gemma's data ending ``<eos>`` (its turns end ``<end_of_turn>``): sampling stops on
    either, so the row ends there, as given; it was skipped as holding a stop token before
    its end (``<eos>``, then the appended ``<end_of_turn>``)."""
    tokenizer = family_tokenizer("gemma")
    row = {"prompt": "What is 12 + 7?", "response": "19<eos>" + after}
    path = _pairs_file(tmp_path, [row])
    examples, skipped = load_sft_examples(
        str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None
    )
    nineteen = tokenizer("19", add_special_tokens=False)["input_ids"]
    assert skipped == 0
    assert [list(e.response_ids) for e in examples] == [[*nineteen, tokenizer.eos_token_id]]


@pytest.mark.parametrize("key", ["train", "eval"])
@pytest.mark.parametrize("source", ["reasoning_gym:chain_sum", "code_tasks:all"])
def test_a_generated_problem_set_is_refused_before_anything_loads(tmp_path, sft_file, key, source):
    """Such sets have no responses; the source used to reach the Hub loader as a dataset name."""
    data = {"train": sft_file, key: source}
    cfg = _cfg("/nonexistent/model", sft_file, tmp_path / "run", data=SFTDataConfig(**data))
    with pytest.raises(ValueError, match=rf"^data\.{key}: {source} is a generated problem set"):
        sft(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"prompt": "2+2?", "completion": "4"}, "missing field 'response' (the response field)"),
        ({"prompt": "2+2?", "response": " "}, "field 'response' (the response) is empty"),
    ],
)
def test_a_missing_or_empty_response_is_called_the_response(tmp_path, row, message):
    """SFT's errors called the response "the answer" (the name of the field mapping's slot)."""
    path = _pairs_file(tmp_path, [row])
    with pytest.raises(ValueError, match=re.escape(f"pairs.jsonl:1: {message}")):
        read_examples(SFTDataConfig(train=str(path)), str(path), limit=None)


def test_a_gsm8k_solution_is_trained_on_whole(tmp_path):
    """RL reads a GSM8K answer's final `#### 72` as the reference; SFT's response is the whole
    worked solution, steps and all."""
    path = tmp_path / "gsm.jsonl"
    solution = "48/2 = <<48/2=24>>24 in May.\n48+24 = <<48+24=72>>72 in all.\n#### 72"
    path.write_text(json.dumps({"question": "How many clips?", "answer": solution}) + "\n")
    cfg = SFTDataConfig(train=str(path), prompt_field="question", response_field="answer")
    assert read_examples(cfg, str(path), limit=None)[0].reference == solution


def test_chat_rows_train_on_their_last_assistant_message(tiny_model, tmp_path):
    """`messages` rows ending with the assistant's reply were refused, told to drop the reply;
    `data.prompt_field=messages data.response_field=messages` now trains on that reply."""
    path = tmp_path / "chat.jsonl"
    messages = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    path.write_text(json.dumps({"messages": messages}) + "\n")
    tokenizer = tiny_model[1]
    cfg = SFTDataConfig(train=str(path), prompt_field="messages", response_field="messages")
    (example,), _ = load_sft_examples(str(path), tokenizer, cfg, limit=None)
    assert tokenizer.decode(example.response_ids) == "4" + tokenizer.eos_token
    assert tokenizer.decode(example.prompt_ids).endswith("2+2?<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(ValueError, match="name this field as data.response_field too, to train"):
        read_examples(
            SFTDataConfig(train=str(path), prompt_field="messages"), str(path), limit=None
        )


def test_a_response_that_is_one_assistant_message_is_its_text(tiny_model, tmp_path):
    """TRL's conversational prompt/completion rows (`"completion": [{"role": "assistant",
    "content": ...}]`) were refused as a list; the message's text is the response."""
    path = tmp_path / "pc.jsonl"
    prompt = [{"role": "user", "content": "2+2?"}]
    rows = [{"prompt": prompt, "completion": [{"role": "assistant", "content": "4"}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = tiny_model[1]
    cfg = SFTDataConfig(train=str(path), response_field="completion")
    (example,), _ = load_sft_examples(str(path), tokenizer, cfg, limit=None)
    assert tokenizer.decode(example.response_ids) == "4" + tokenizer.eos_token
    rows[0]["completion"][0]["content"] = " "
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        ValueError, match=r"pc\.jsonl:1: field 'completion' \(the response\) is empty"
    ):
        load_sft_examples(str(path), tokenizer, cfg, limit=None)


@pytest.mark.parametrize(("role", "use"), [("train", "trained on"), ("eval", "in sft/eval_loss")])
def test_rows_over_max_tokens_are_skipped_and_warned_with_their_length(
    tiny_model, tmp_path, role, use
):
    """A row of exactly data.max_tokens (prompt + response + end-of-turn token) is kept, a
    longer one is skipped; the warning says which data set, how many of how many rows and the longest. It
    read the same for data.train and data.eval (often the same file) and did not say how far
    over the limit the rows were."""
    tokenizer = tiny_model[1]
    rows = [
        {"prompt": "What is 12 + 7?", "response": "12 + 7 = 19. Answer: 19"},
        {"prompt": "What is 5 - 3?", "response": "5 - 3 = 2. Answer: 2"},
    ]
    path = _pairs_file(tmp_path, rows)
    full = load_sft_examples(str(path), tokenizer, SFTDataConfig(train=str(path)), limit=None)
    long, short = (len(e.prompt_ids) + len(e.response_ids) for e in full.examples)
    assert long > short
    cfg = SFTDataConfig(train=str(path), max_tokens=long - 1)
    message = (
        rf"data\.{role}: .*pairs\.jsonl: skipped 1 of 2 rows, 1 longer than "
        rf"data\.max_tokens={long - 1} \(prompt \+ response \+ end-of-turn token; the longest "
        rf"{long} tokens\); they are not {use}"
    )
    with pytest.warns(UserWarning, match=message):
        kept, skipped = load_sft_examples(str(path), tokenizer, cfg, limit=None, role=role)
    assert (len(kept), skipped) == (1, 1)
    exact = SFTDataConfig(train=str(path), max_tokens=long)
    assert load_sft_examples(str(path), tokenizer, exact, limit=None).skipped == 0


def test_a_response_holding_the_end_of_turn_token_before_its_end_is_skipped(tiny_model, tmp_path):
    """``6<|im_end|> and then more`` trained the model to end its turn and go on writing;
    sampling stops at that token, so the rest could never be generated. It was kept without a
    word; a response ending with the token (then whitespace) is kept as before."""
    tokenizer = tiny_model[1]
    rows = [
        {"prompt": "What is 2 + 2?", "response": "4<|im_end|>\n"},
        {"prompt": "What is 3 + 3?", "response": "6<|im_end|> and then more"},
    ]
    path = _pairs_file(tmp_path, rows)
    message = (
        r"pairs\.jsonl: skipped 1 of 2 rows, 1 whose response holds '<\|im_end\|>' before its "
        r"end \(sampling stops there, so what follows could never be generated\); they are not "
        r"trained on"
    )
    with pytest.warns(UserWarning, match=message):
        cfg = SFTDataConfig(train=str(path))
        kept, skipped = load_sft_examples(str(path), tokenizer, cfg, limit=None)
    assert skipped == 1
    assert [tokenizer.decode(e.response_ids) for e in kept] == ["4<|im_end|>"]


def test_a_warm_up_as_long_as_the_run_is_warned(tiny_model_dir, sft_file, tmp_path):
    """The sft recipe warms up over 10 steps: a run of 6 pairs for 4 epochs of batches of 3
    (8 steps) never reached optim.lr (at most 8 / 10 of it) and never decayed, unsaid."""
    optim = OptimConfig(lr=1e-3, warmup_steps=10, schedule="cosine")
    cfg = _cfg(tiny_model_dir, sft_file, tmp_path / "run", optim=optim)
    message = (
        r"optim\.warmup_steps=10 is not below the run's 8 optimiser steps: the learning rate rises "
        r"to "
        r"0\.0008 at the last step \(optim\.lr=0\.001\); the cosine decay never starts"
    )
    with pytest.warns(UserWarning, match=message):
        result = sft(cfg)
    lrs = [r["optim/lr"] for r in read_metrics(result.run_dir / "metrics.jsonl")[1:]]
    assert max(lrs) == pytest.approx(8e-4, rel=1e-9)


class _KillAt:
    """A callback that stops the run with an error after step ``step``'s metrics are written
    (before that step's checkpoint), as a crash would."""

    def __init__(self, step):
        self.step = step

    def __getattr__(self, hook):
        return lambda job, *args: None

    def on_step(self, job, step, record):
        if step == self.step:
            raise RuntimeError("killed")


class _Evaluated:
    """A callback that records the steps the run evaluated at."""

    def __init__(self):
        self.steps = []

    def __getattr__(self, hook):
        return lambda job, *args: None

    def on_eval(self, job, step, record):
        self.steps.append(step)


@pytest.mark.parametrize("steps", [None, 10])
def test_a_run_killed_mid_way_resumes_to_the_same_metrics_and_weights(
    tiny_model_dir, sft_file, tmp_path, steps
):
    """7 pairs in batches of 3 (short last batches, or batches that wrap with ``steps``),
    warm-up then cosine to a floor, micro-batches of 2, checkpoints every 2 steps: a run
    stopped after step 5 (its rows past step 4 written) and resumed from step_000004 logs and
    ends exactly as a run that was never stopped: one step-0 row (the held-out NLL before
    training, not measured again on the resume) and each step's row once."""
    from rlvr.models import load_model
    from rlvr.train.config import CheckpointConfig

    path = tmp_path / "seven.jsonl"
    extra = {"prompt": "What is 9 + 1?", "response": "9 + 1 = 10. Answer: 10"}
    path.write_text(Path(sft_file).read_text() + json.dumps(extra) + "\n")
    optim = OptimConfig(lr=3e-3, schedule="cosine", warmup_steps=2, min_lr=1e-4, micro_batch_size=2)

    def cfg(out):
        data = SFTDataConfig(train=str(path), eval=sft_file)
        return _cfg(
            tiny_model_dir,
            str(path),
            tmp_path / out,
            epochs=3,
            steps=steps,
            data=data,
            optim=optim,
            checkpoint=CheckpointConfig(every=2, keep_last=2),
        )

    full = sft(cfg("full"))
    with pytest.raises(RuntimeError, match="killed"):
        sft(cfg("cut"), callbacks=[_KillAt(5)])
    evaluated = _Evaluated()
    cut = sft(cfg("cut"), resume=True, callbacks=[evaluated])
    drop = ("time/", "perf/")
    rows = [
        [{k: v for k, v in r.items() if not k.startswith(drop)} for r in read_metrics(d)]
        for d in (full.run_dir / "metrics.jsonl", cut.run_dir / "metrics.jsonl")
    ]
    assert rows[0] == rows[1] and [r["step"] for r in rows[1]] == list(range((steps or 9) + 1))
    assert 0 not in evaluated.steps and evaluated.steps  # the resume evaluated after step 4 only
    assert cut.evals == full.evals and 0 in cut.evals  # step 0's NLL from the checkpoint
    a, b = (load_model(str(r.model_dir))[0].state_dict() for r in (full, cut))
    for name, value in a.items():
        assert torch.equal(value, b[name]), name


def _hand_nll(model, examples):
    """Token-mean NLL of the responses by plain cross_entropy, one unpadded sequence each."""
    total, count = 0.0, 0
    for e in examples:
        ids = torch.tensor([[*e.prompt_ids, *e.response_ids]])  # [1, P + R]
        logits = model(input_ids=ids).logits[0].float()  # [P + R, V]
        start = len(e.prompt_ids)
        nll = torch.nn.functional.cross_entropy(
            logits[start - 1 : -1], ids[0, start:], reduction="sum"
        )
        total, count = total + nll, count + len(e.response_ids)
    return total / count


@pytest.mark.parametrize("share_prompt", [True, False])
@pytest.mark.parametrize("micro", [None, 2])
def test_sft_step_on_chat_rows_is_the_plain_cross_entropy_gradient(
    tiny_model_dir, tmp_path, monkeypatch, share_prompt, micro
):
    """Multi-turn chat rows (the last assistant message is the response; earlier turns, the
    system message and the template are prompt), three rows sharing one prompt (computed once
    with model.share_prompt), micro-batches of unequal token counts: sft_step's loss and
    gradient are those of F.cross_entropy over the response tokens and their EOS, token mean
    over the whole step."""
    import rlvr.train.supervised as supervised
    from rlvr.models import load_model
    from rlvr.train.optim import Stepped

    user = {"role": "user", "content": "What is 40 + 2?"}
    rows = [
        [
            {"role": "system", "content": "Old"},
            {"role": "user", "content": "What is 12 + 7?"},
            {"role": "assistant", "content": "19"},
            {"role": "user", "content": "And 5 - 3?"},
            {"role": "assistant", "content": "5 - 3 = 2. Answer: 2"},
        ],
        [user, {"role": "assistant", "content": "40 + 2 = 42. Answer: 42"}],
        [user, {"role": "assistant", "content": "42"}],
        [user, {"role": "assistant", "content": "It is 42, since 40 + 2 = 42."}],
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"messages": m}) + "\n" for m in rows))
    data = SFTDataConfig(
        train=str(path), prompt_field="messages", response_field="messages", system_prompt="Hi."
    )
    model, tokenizer = load_model(str(tiny_model_dir))
    examples, _ = load_sft_examples(str(path), tokenizer, data, limit=None)
    first = tokenizer.decode(examples[0].prompt_ids)
    assert first.startswith("<|im_start|>system\nHi.<|im_end|>") and "19<|im_end|>" in first
    expected = _hand_nll(model, examples)
    expected.backward()
    hand = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    grads = {}

    def capture(model, optimizer, scheduler, cfg):
        grads.update({n: p.grad.clone() for n, p in model.named_parameters()})
        model.zero_grad()
        return Stepped(0.0, True)

    monkeypatch.setattr(supervised, "clip_and_step", capture)
    cfg = SFTConfig(
        model=ModelConfig(name=str(tiny_model_dir), share_prompt=share_prompt),
        data=data,
        batch_size=4,
        optim=OptimConfig(micro_batch_size=micro),
    )
    batch = pack([e.prompt_ids for e in examples], [e.response_ids for e in examples], 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the step is captured above
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    metrics = sft_step(model, optimizer, schedule, batch, cfg)
    assert metrics["sft/loss"] == pytest.approx(float(expected), rel=1e-5)
    assert metrics["sft/tokens"] == sum(len(e.response_ids) for e in examples)
    for name, grad in hand.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("template", [True, False])
@pytest.mark.parametrize("system_prompt", [None, "", "Be brief."])
def test_sft_prompts_are_the_prompts_rl_gives_the_same_model(
    tiny_model, tmp_path, template, system_prompt
):
    """An SFT'd model is trained on the format rlvr train then prompts it with: the same
    tokens for the same row and data.system_prompt, chat template or none (a base model)."""
    from rlvr.train.config import DataConfig
    from rlvr.train.prompts import load_prompt_set

    tokenizer = copy.deepcopy(tiny_model[1])
    if not template:
        tokenizer.chat_template = None
    rows = [
        {"prompt": "What is 12 + 7?", "response": "19"},
        {"prompt": [{"role": "user", "content": "2+2?"}], "response": "4"},
    ]
    path = _pairs_file(tmp_path, rows)
    sft_data = SFTDataConfig(train=str(path), system_prompt=system_prompt)
    examples, _ = load_sft_examples(str(path), tokenizer, sft_data, limit=None)
    rl_data = DataConfig(train=str(path), answer_field="response", system_prompt=system_prompt)
    rl = load_prompt_set(tokenizer, rl_data, role="train")
    assert [e.prompt_ids for e in examples] == [p.ids for p in rl.prompts]
    assert examples[0].response_ids[-1] == tokenizer.eos_token_id


@pytest.mark.parametrize(
    ("role", "use"), [("train", "they train on"), ("eval", "their sft/eval_loss is on")]
)
def test_pairs_longer_than_the_models_context_are_warned(
    tiny_model_dir, sft_file, tmp_path, role, use
):
    """The klear/sft recipe lets pairs of 32768 tokens through on the tiny preset (a context
    of 1024 positions): such pairs trained past the model's positions without a word."""
    from transformers import AutoConfig

    context = AutoConfig.from_pretrained(tiny_model_dir).max_position_embeddings
    path = tmp_path / "long.jsonl"
    long = {"prompt": "What is 12 + 7?", "response": "12 + 7 = 19. " * (context // 4)}
    path.write_text(Path(sft_file).read_text() + json.dumps(long) + "\n")
    files = {"train": sft_file, "eval": sft_file, role: str(path)}
    data = SFTDataConfig(train=files["train"], eval=files["eval"], max_tokens=8 * context)
    cfg = _cfg(tiny_model_dir, sft_file, tmp_path / "run", epochs=1, data=data, batch_size=7)
    message = (
        rf"data\.{role}: 1 of 7 pairs are longer than the model's context "
        rf"\(max_position_embeddings={context}; the longest \d+ tokens\), which "
        rf"data\.max_tokens={8 * context} lets through: {use} positions the model was not "
        rf"built for; data\.max_tokens={context} skips them"
    )
    with pytest.warns(UserWarning, match=message):
        sft(cfg)
