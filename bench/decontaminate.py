"""Decontamination speed: a prompt set against evaluation problems, 9-gram index, one process.

Synthetic text (reproducible, no network): words drawn from a Zipf-like vocabulary of
20,000 words with numbers and LaTeX mixed in, prompts of 40 to 120 words, evaluation
problems of 30 to 150; every 100th prompt carries a 12-word passage of an evaluation
problem, so about 1% are contaminated. Reports the time to index the evaluation sets and
to check the prompts (``rlvr.data.contamination``), and prompts per second::

    python bench/decontaminate.py                         # 100,000 prompts x 3,000 problems
    python bench/decontaminate.py --prompts 20000 --problems 1000
"""

from __future__ import annotations

import argparse
import random
import time

from rlvr.data.contamination import NgramIndex


def _vocabulary(size: int) -> list[str]:
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(size * 2)}
    extra = [r"$x^2$", r"\frac{1}{2}", "+", "=", r"\sqrt{3}", "(", ")", "17", "2024", "3.5"]
    return sorted(words)[:size] + extra


def _texts(rng: random.Random, vocab: list[str], count: int, lo: int, hi: int) -> list[str]:
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    out = []
    for _ in range(count):
        out.append(" ".join(rng.choices(vocab, weights=weights, k=rng.randint(lo, hi))))
    return out


def run(prompts: int, problems: int, n: int) -> dict[str, float]:
    rng = random.Random(0)
    vocab = _vocabulary(20_000)
    evals = _texts(rng, vocab, problems, 30, 150)
    train = _texts(rng, vocab, prompts, 40, 120)
    for i in range(0, prompts, 100):  # plant a 12-word passage of a problem
        words = evals[i % problems].split()
        start = rng.randrange(max(1, len(words) - 12))
        train[i] = f"{train[i]} {' '.join(words[start : start + 12])}"
    start = time.perf_counter()
    index = NgramIndex(n)
    for j, text in enumerate(evals):
        index.add("eval", str(j), text)
    indexed = time.perf_counter()
    hits = sum(index.match(text) is not None for text in train)
    done = time.perf_counter()
    return {
        "index_s": indexed - start,
        "match_s": done - indexed,
        "ngrams": float(len(index)),
        "contaminated": float(hits),
        "prompts_per_s": prompts / (done - indexed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--problems", type=int, default=3_000)
    parser.add_argument("--ngram", type=int, default=9)
    args = parser.parse_args()
    r = run(args.prompts, args.problems, args.ngram)
    print(
        f"{args.prompts} prompts x {args.problems} problems, {args.ngram}-grams: "
        f"index {r['index_s']:.2f}s ({r['ngrams']:.0f} n-grams), match {r['match_s']:.2f}s "
        f"({r['prompts_per_s']:.0f} prompts/s), {r['contaminated']:.0f} contaminated"
    )


if __name__ == "__main__":
    main()
