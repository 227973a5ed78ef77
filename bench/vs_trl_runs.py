"""``bench/vs_trl.py``'s runs: each trainer in its own interpreter (``bench/_vs_trl_child.py``)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vs_trl_config import BenchSpec

CHILD = Path(__file__).with_name("_vs_trl_child.py")


def child_env(threads: int) -> dict[str, str]:
    """Environment of both children: offline, ``src`` importable, thread pools pinned."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }


def run_child(spec: BenchSpec, trainer: str, work: Path) -> dict[str, Any]:
    """Run one trainer in a fresh interpreter; its result dict."""
    spec_file, out_file = work / f"{trainer}-spec.json", work / f"{trainer}-result.json"
    spec_file.write_text(json.dumps(dataclasses.asdict(spec)))
    cmd = [sys.executable, str(CHILD), str(spec_file), trainer, str(out_file), str(work / trainer)]
    proc = subprocess.run(cmd, env=child_env(spec.threads), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"{trainer} run for {spec.preset} failed:\n{tail}")
    return json.loads(out_file.read_text())


def bench_preset(spec: BenchSpec, trainers: list[str]) -> dict[str, Any]:
    """Run every trainer on ``spec``; the raw results and their summaries."""
    results = {}
    with tempfile.TemporaryDirectory(prefix=f"vs_trl-{Path(spec.preset).name}-") as tmp:
        for trainer in trainers:
            print(f"  running {trainer} ...", flush=True)
            results[trainer] = run_child(spec, trainer, Path(tmp))
    check_same_prompts(spec, results)
    return {"spec": dataclasses.asdict(spec), "results": results}


def check_same_prompts(spec: BenchSpec, results: dict[str, Any]) -> None:
    """Every trainer sampled from the same ``num_prompts`` prompt token ids, in the same order."""
    used = {t: (r["prompts_used"], r["prompt_hash"]) for t, r in results.items()}
    if any(n != spec.num_prompts for n, _ in used.values()):
        raise RuntimeError(f"expected {spec.num_prompts} prompts per trainer, got {used}")
    if len({h for _, h in used.values()}) != 1:
        raise RuntimeError(f"the trainers sampled from different prompts: {used}")
