"""``bench/samplers.py`` end to end on the tiny random model (lean and hf; vLLM is measured by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "samplers.py"


def test_the_table_has_a_row_per_sampler(tiny_model_dir):
    args = ["--model", str(tiny_model_dir), "--samplers", "lean,hf", "--prompts", "2"]
    args += ["--group-size", "2", "--max-new-tokens", "4", "--repeats", "1", "--threads", "1"]
    out = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0].startswith("machine before:") and "1 thread(s)" in lines[0]
    rows = {line.split()[0]: line.split() for line in lines if line.startswith(("lean ", "hf "))}
    assert sorted(rows) == ["hf", "lean"]
    assert float(rows["lean"][6]) == 1.0  # x lean of the anchor itself
    for row in rows.values():
        tokens, seconds, per_s = int(row[4]), float(row[3]), float(row[5])
        assert 2 * 2 <= tokens <= 2 * 2 * 4  # at least one token per completion, at most the budget
        # columns are rounded: seconds to 1 ms, tokens/s to 0.1
        assert (
            tokens / (seconds + 5e-4) - 0.05 <= per_s <= tokens / max(seconds - 5e-4, 1e-6) + 0.05
        )
