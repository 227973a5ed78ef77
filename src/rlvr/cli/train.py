"""``rlvr train``: RL training from a YAML config and ``key=value`` overrides.

With no arguments it runs the embedded ``demo`` config. ``--resume DIR`` continues the
run in ``DIR`` from its latest checkpoint, with the configuration saved there (overrides
given on the command line still apply, e.g. ``steps=200`` to extend a run).
"""

from __future__ import annotations

import argparse

from rlvr.cli.common import command, dry_run, parse_run_args, print_prompt

_SHOWN = "prompts (chat template, data.system_prompt and data.template applied)"


@command
def main(argv: list[str]) -> int:
    """``rlvr train [--config FILE] [key=value ...] [--resume [DIR]]``."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.loop import train

    parser = argparse.ArgumentParser(
        prog="rlvr train",
        description="RL with verifiable rewards. With no config, runs the embedded demo.",
        epilog="example: rlvr train --config demo objective.name=abc_grpo objective.eps3=0.3 model=smollm2-135m",
    )
    cfg, resume, dry, shown = parse_run_args(
        parser, TrainConfig, argv, default_config="demo", show_prompts=_SHOWN
    )
    if dry:
        return dry_run(cfg, resume=resume)
    if shown:
        return show_prompts(cfg, shown)
    result = train(cfg, resume=resume)
    for line in result.summary_lines():
        print(line)
    options = "".join(f", {k}={v}" for k, v in sorted(cfg.reward.options.items()))
    print(f"{'verifier:':<18}{cfg.reward.verifier}{options} (reward section of config.yaml)")
    return 0


def show_prompts(cfg, count: int) -> int:
    """``--show-prompts N``: the first ``count`` prompts of ``data.train`` (then of ``data.eval``)
    as the run formats and tokenises them (its tokenizer, the model's context limit), decoded
    from their token ids."""
    from rlvr.models import model_tokenizer_and_config
    from rlvr.train.loop import fit_context
    from rlvr.train.prompts import load_prompt_set

    tokenizer, model_config = model_tokenizer_and_config(cfg.model.name)
    data = fit_context(cfg, model_config)
    for role in ("train", "eval") if data.eval else ("train",):
        prompts = load_prompt_set(tokenizer, data, role=role).prompts
        for i, prompt in enumerate(prompts[:count], start=1):
            label = f"data.{role} prompt {i} of {len(prompts)}"
            print_prompt(tokenizer, label, prompt.ids, prompt.example.id, prompt.reference)
    return 0
