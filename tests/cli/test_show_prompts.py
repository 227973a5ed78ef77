"""``rlvr train --show-prompts N``: the prompts exactly as the model gets them, nothing run."""

from __future__ import annotations

import json
import shutil

import pytest

from rlvr.cli import main

TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_show_prompts_prints_the_formatted_prompts_and_runs_nothing(
    tiny_model_dir, tmp_path, capsys
):
    """Nothing showed the prompt a run feeds the model (chat template, data.system_prompt and
    data.template applied); --dry-run prints the configuration, `rlvr data show` the rows."""
    from transformers import PreTrainedTokenizerFast

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model)
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(model)
    (model / "model.safetensors").unlink()  # the weights are not loaded
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
