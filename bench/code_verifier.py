"""The ``code`` verifier on the code recipe's batches: seconds to score one batch.

    PYTHONPATH=src python bench/code_verifier.py                        # this tree
    PYTHONPATH=src python bench/code_verifier.py --compare /path/to/other/checkout/src

Two batches of 16 completions (the code recipe's 4 prompts x G=4), each scored as the trainer
scores them, with ``Scorer(get_verifier("code"), ScoringConfig(timeout_s=30, workers=2))``:

- ``call``: the recipe's own problems (``code_tasks:all``, level 1, 5 call-style tests each,
  seed 0); each completion defines the function, right for half of them;
- ``assert``: the same functions tested by MBPP-style asserts, loops and a generator included
  (``assert all(f(x) == y for x, y in ...)``), which is where the way tests are judged counts.

With ``--compare SRC``, the same measurement runs in a fresh process on the package under
``SRC`` (e.g. another checkout's ``src``), alternating with this tree's round by round, so both
see the same machine load; ``old / new`` is their ratio. The median of ``--rounds`` is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _batches() -> dict[str, tuple[list[str], list[object]]]:
    from rlvr.data.code_tasks import code_task_rows

    rows = code_task_rows("all", size=16, seed=0, config={"max_level": 1, "tests": 5})
    completions, calls, asserts = [], [], []
    for i, row in enumerate(rows):
        tests = row["tests"]
        name, pairs = tests["fn_name"], list(zip(tests["inputs"], tests["outputs"], strict=True))
        table = {repr(tuple(args)): out for args, out in pairs}
        answer = f"_T = {table!r}\n" if i % 2 == 0 else "_T = {}\n"  # right for half
        body = f"def {name}(*args):\n    return _T.get(repr(tuple(args)))\n"
        completions.append(f"```python\n{answer}{body}```")
        calls.append(tests)
        cases = [f"({', '.join(map(repr, args))},)" for args, _ in pairs]
        asserts.append(
            [
                f"assert {name}(*{case}) == {out!r}"
                for case, (_, out) in zip(cases, pairs, strict=True)
            ]
            + [
                f"for a, y in [{', '.join(f'({c}, {o!r})' for c, (_, o) in zip(cases, pairs, strict=True))}]:"
                f"\n    assert {name}(*a) == y",
                f"assert all({name}(*a) == y for a, y in [{', '.join(f'({c}, {o!r})' for c, (_, o) in zip(cases, pairs, strict=True))}])",
            ]
        )
    return {"call": (completions, calls), "assert": (completions, asserts)}


def measure() -> dict[str, float]:
    """Seconds to score each batch once (after one warm-up batch)."""
    from rlvr.rewards import Scorer, ScoringConfig, get_verifier

    times = {}
    with Scorer(get_verifier("code"), ScoringConfig(timeout_s=30.0, workers=2)) as scorer:
        batches = _batches()
        scorer(*batches["call"])  # warm-up: worker processes, isolation probe
        for name, (completions, references) in batches.items():
            start = time.perf_counter()
            scores = scorer(completions, references)
            times[name] = time.perf_counter() - start
            times[name + "_mean_score"] = sum(scores.values) / len(scores.values)
    return times


def _run(src: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", default="", help="src directory of the other package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure()))
        return
    sides = {"new": str(ROOT / "src")} | ({"old": args.compare} if args.compare else {})
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, src in sides.items():
            runs[side].append(_run(src))
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    for batch in ("call", "assert"):
        medians = {side: statistics.median(r[batch] for r in runs[side]) for side in sides}
        scores = {side: runs[side][0][batch + "_mean_score"] for side in sides}
        line = ", ".join(
            f"{side} {medians[side]:.2f} s (mean score {scores[side]:.3f})" for side in sides
        )
        ratio = f", old / new {medians['old'] / medians['new']:.2f}" if "old" in sides else ""
        print(f"{batch:>6}: {line}{ratio}")


if __name__ == "__main__":
    main()
