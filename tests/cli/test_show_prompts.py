"""``rlvr train/sft/eval --show-prompts N``: the prompts exactly as the model gets them, nothing run."""

from __future__ import annotations

import json
import shutil

import pytest

from rlvr.cli import main

TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _templated_model_without_weights(tiny_model_dir, tmp_path):
    from transformers import PreTrainedTokenizerFast

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model)
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(model)
    (model / "model.safetensors").unlink()  # the weights are not loaded
    return model


def test_show_prompts_prints_the_formatted_prompts_and_runs_nothing(
    tiny_model_dir, tmp_path, capsys
):
    """Nothing showed the prompt a run feeds the model (chat template, data.system_prompt and
    data.template applied); --dry-run prints the configuration, `rlvr data show` the rows."""
    model = _templated_model_without_weights(tiny_model_dir, tmp_path)
    rows = [{"prompt": "1 + 1 =", "answer": "2"}, {"prompt": "2 + 3 =", "answer": "5"}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    argv = ["train", f"model={model}", f"data.train={data}", "data.system_prompt=Be brief.",
            "data.template='Q: {prompt}'", f"log.output_dir={out}", "data.eval=null", "--show-prompts", "1"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    head, text = printed.split("\n", 1)
    assert head.startswith("=== data.train prompt 1 of 2 (id rows-0, ") and "reference '2'" in head
    assert text == "<|system|>Be brief.\n<|user|>Q: 1 + 1 =\n<|assistant|>\n"
    assert not out.exists()
    held = tmp_path / "held.jsonl"  # data.eval's prompts follow, each read as the run reads it
    held.write_text(json.dumps({"q": "7 - 4 =", "a": "3"}) + "\n")
    keys = [f"data.eval={held}", "data.eval_prompt_field=q", "data.eval_answer_field=a"]
    assert main([*argv[:-3], *keys, *argv[-2:]]) == 0
    printed = capsys.readouterr().out
    eval_head, eval_text = printed[printed.index("=== data.eval") :].split("\n", 1)
    assert eval_head.startswith("=== data.eval prompt 1 of 1 (id held-0, ")
    assert "reference '3'" in eval_head
    assert eval_text == "<|system|>Be brief.\n<|user|>Q: 7 - 4 =\n<|assistant|>\n"
    with pytest.raises(SystemExit, match="2"):  # argparse's own error
        main([*argv[:-1], "0"])
    assert "--show-prompts: expected a whole number >= 1, got '0'" in capsys.readouterr().err


def test_eval_show_prompts_prints_each_sources_prompts_and_samples_nothing(
    tiny_model_dir, tmp_path, capsys
):
    """`rlvr eval` had no way to show the prompts it samples from (`rlvr train` had)."""
    model = _templated_model_without_weights(tiny_model_dir, tmp_path)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(
        "".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n" for i in range(3))
    )
    second.write_text(json.dumps({"prompt": "7 - 4 =", "answer": "3"}) + "\n")
    output = tmp_path / "eval.json"
    argv = ["eval", "--model", str(model), "--data", str(first), "--data", str(second),
            "--system-prompt", "Be brief.", "--template", "Q: {prompt}", "--output", str(output),
            "--show-prompts", "2"]  # fmt: skip
    assert main(argv) == 0
    blocks = capsys.readouterr().out.split("=== ")[1:]
    heads = [block.split(" (")[0] for block in blocks]
    assert heads == ["first prompt 1 of 3", "first prompt 2 of 3", "second prompt 1 of 1"]
    assert "reference '3')" in blocks[2]
    assert blocks[2].split("\n", 1)[1] == "<|system|>Be brief.\n<|user|>Q: 7 - 4 =\n<|assistant|>\n"
    assert not output.exists() and not list(tmp_path.glob("*.partial.pt"))


def test_sft_show_prompts_prints_prompt_and_response_apart_and_trains_nothing(
    tiny_model_dir, tmp_path, capsys
):
    """`rlvr sft` had no way to show the text it trains on, nor where the loss starts."""
    model = _templated_model_without_weights(tiny_model_dir, tmp_path)
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps({"prompt": "1 + 1 =", "response": "2"}) + "\n")
    out = tmp_path / "run"
    argv = ["sft", f"model={model}", f"data.train={data}", "data.system_prompt=Be brief.",
            f"log.output_dir={out}", "--show-prompts", "3"]  # fmt: skip
    assert main(argv) == 0
    blocks = capsys.readouterr().out.split("=== ")[1:]
    assert [b.split(" (")[0] for b in blocks] == [
        "data.train example 1 of 1: prompt, no loss",
        "data.train example 1 of 1: response, the loss",
    ]
    assert blocks[0].split("\n", 1)[1] == "<|system|>Be brief.\n<|user|>1 + 1 =\n<|assistant|>\n"
    assert blocks[1].split("\n", 1)[1].startswith("2")
    assert not out.exists()


def test_a_reasoning_gym_entry_shows_its_answer(capsys):
    """The head showed the entry's repr cut at 60 characters, "{'id': 'chain_sum-0-0',
    'question': 'State the final answ...": never the answer."""
    from rlvr.cli.common import print_prompt

    class Decoder:
        def decode(self, ids, **_):
            return "0 - 4 - 8 - 7 + 6 ="

    entry = {"id": "chain_sum-0-0", "question": "State the final answer to: 0 - 4 - 8 - 7 + 6 =",
             "answer": "-13", "metadata": {"num_terms": 5}}  # fmt: skip
    print_prompt(Decoder(), "data.train prompt 1 of 4000", [1, 2], entry["id"], entry)
    head = capsys.readouterr().out.splitlines()[0]
    assert (
        head == "=== data.train prompt 1 of 4000 (id chain_sum-0-0, 2 tokens, reference '-13') ==="
    )


def test_eval_shows_a_runs_held_out_prompts_as_the_run_prompted(tiny_model_dir, tmp_path, capsys):
    """`rlvr eval --model <run>/checkpoints/step_N --show-prompts N` without --data shows the
    run's held-out prompts: its data.eval with its field keys, template and system prompt,
    one over data.max_prompt_tokens skipped as the run skipped it."""
    model = _templated_model_without_weights(tiny_model_dir, tmp_path)
    checkpoint = tmp_path / "run" / "checkpoints" / "step_000002"
    shutil.copytree(model, checkpoint)
    held = tmp_path / "held.jsonl"
    rows = [
        {"q": "7 - 4 =", "a": "3"},
        {"q": "1 + " * 40 + "1 =", "a": "41"},
        {"q": "2 =", "a": "2"},
    ]
    held.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "run" / "config.yaml").write_text(
        f"data: {{train: {held}, eval: {held}, eval_prompt_field: q, eval_answer_field: a,\n"
        "  template: 'Q: {prompt}', system_prompt: Be brief., max_prompt_tokens: 80}\n"
    )
    assert main(["eval", "--model", str(checkpoint), "--show-prompts", "5"]) == 0
    printed = capsys.readouterr().out
    heads = [line for line in printed.splitlines() if line.startswith("===")]
    assert [h.split(" (")[0] for h in heads] == ["=== held prompt 1 of 2", "=== held prompt 2 of 2"]
    assert "<|system|>Be brief.\n<|user|>Q: 7 - 4 =\n<|assistant|>\n" in printed
    assert "reference '3'" in heads[0] and "reference '2'" in heads[1]


def test_a_long_reference_shows_its_end_where_the_answer_is(tiny_model_dir, tmp_path, capsys):
    """The head showed a reference's first 57 characters, so a MATH solution's `\\boxed{}`
    (what the verifier compares) was cut off; a long reference now shows its start and end."""
    model = _templated_model_without_weights(tiny_model_dir, tmp_path)
    data = tmp_path / "math.jsonl"
    solution = "We multiply ten twos together, one at a time: $2^{10}=\\boxed{1024}$."
    data.write_text(json.dumps({"problem": "Compute $2^{10}$.", "solution": solution}) + "\n")
    argv = ["eval", "--model", str(model), "--data", str(data), "--prompt-field", "problem",
            "--answer-field", "solution", "--output", str(tmp_path / "e.json"),
            "--show-prompts", "1"]  # fmt: skip
    assert main(argv) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.endswith(
        "reference 'We multiply ten twos togeth...ime: $2^{10}=\\\\boxed{1024}$.') ==="
    )
