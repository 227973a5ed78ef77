"""Write reasoning-gym chain sums as verl's parquet files (and print where they went).

    python examples/chain_sum_data.py --out data/chain_sum --train 2048 --test 128

Each row is verl's RL format: ``prompt`` (chat messages), ``data_source``,
``reward_model.ground_truth`` (the answer) and ``extra_info.entry`` (the reasoning-gym entry
as JSON, which :mod:`verl_reward` hands to rlvr's verifier). Train and test never share a
question. Uses rlvr's reasoning-gym writer (``rlvr.data.gym_rows``), offline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from datasets import Dataset

from rlvr.data import gym_rows

TASK = "chain_sum"
CONFIG = {"min_terms": 2, "max_terms": 4, "min_digits": 1, "max_digits": 2}
INSTRUCTION = "Solve the problem and give the final answer as \\boxed{{answer}}.\n\n{question}"


def verl_row(entry: dict, split: str, index: int) -> dict:
    """One verl RL row from a reasoning-gym entry."""
    return {
        "data_source": f"rlvr/{TASK}",
        "prompt": [{"role": "user", "content": INSTRUCTION.format(question=entry["question"])}],
        "ability": "arithmetic",
        "reward_model": {"style": "rule", "ground_truth": str(entry["answer"])},
        "extra_info": {"split": split, "index": index, "entry": json.dumps(entry)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("data/chain_sum"))
    parser.add_argument("--train", type=int, default=2048)
    parser.add_argument("--test", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    test = gym_rows(TASK, size=args.test, seed=args.seed + 1_000_000, config=CONFIG)
    train = gym_rows(
        TASK, size=args.train, seed=args.seed, config=CONFIG, exclude=[e["question"] for e in test]
    )
    for split, entries in (("train", train), ("test", test)):
        rows = [verl_row(entry, split, i) for i, entry in enumerate(entries)]
        Dataset.from_list(rows).to_parquet(str(args.out / f"{split}.parquet"))
        print(args.out / f"{split}.parquet", len(rows))


if __name__ == "__main__":
    main()
