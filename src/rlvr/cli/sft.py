"""``rlvr sft``: supervised fine-tuning on prompt/response JSONL."""

from __future__ import annotations

import argparse

from rlvr.cli.common import command, dry_run, parse_run_args, print_tokens


@command
def main(argv: list[str]) -> int:
    """``rlvr sft --config FILE [key=value ...] [--resume [DIR]]``."""
    from rlvr.train.config import SFTConfig
    from rlvr.train.supervised import sft

    parser = argparse.ArgumentParser(
        prog="rlvr sft",
        description="Supervised fine-tuning: token-mean NLL of responses, prompt tokens masked.",
        epilog="example: rlvr sft data.train=pairs.jsonl model=tiny optim.lr=3e-4 epochs=2",
    )
    cfg, resume, dry, shown = parse_run_args(
        parser,
        SFTConfig,
        argv,
        default_config=None,
        example="data.train=pairs.jsonl epochs=2",
        show_prompts="pairs (the prompt, chat template and data.system_prompt applied, then the response the loss is on)",
    )
    if dry:
        return dry_run(cfg, resume=resume)
    if shown:
        return show_examples(cfg, shown)
    result = sft(cfg, resume=resume)
    for line in result.summary_lines():
        print(line)
    return 0


def show_examples(cfg, count: int) -> int:
    """``--show-prompts N``: the first ``count`` pairs of ``data.train`` (then of ``data.eval``)
    as the run tokenises them, the prompt (no loss) and the response (the loss) apart."""
    from rlvr.models import model_tokenizer_and_config
    from rlvr.train.prompts import load_sft_examples

    tokenizer = model_tokenizer_and_config(cfg.model.name)[0]
    data = cfg.data
    for role, source in (("train", data.train), ("eval", data.eval)):
        if not source:
            continue
        limit = data.max_examples if role == "train" else None
        examples = load_sft_examples(source, tokenizer, data, limit=limit, role=role).examples
        for i, example in enumerate(examples[:count], start=1):
            label = f"data.{role} example {i} of {len(examples)}"
            for part, ids in (
                ("prompt, no loss", example.prompt_ids),
                ("response, the loss", example.response_ids),
            ):
                print_tokens(tokenizer, f"{label}: {part} ({len(ids)} tokens)", list(ids))
    return 0
