"""The numbers docs/compare.md gives for a study whose runs are committed, recomputed from the
runs' own files (``final.json``, ``metrics.jsonl``) with numpy and scipy, not with rlvr."""

import json
import math
import re
import tarfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

ROOT = Path(__file__).resolve().parents[1]
KLEAR = ROOT / "docs/studies/evidence-smollm2-klear-confirm/runs.tar.gz"


def _runs(archive: Path) -> dict[str, dict[int, dict]]:
    """Per arm folder, per seed: its final.json and its metrics.jsonl rows."""
    runs: dict[str, dict[int, dict]] = defaultdict(lambda: defaultdict(dict))
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")  # runs/<arm>/seed<N>/<file>
            if len(parts) != 4 or parts[3] not in ("final.json", "metrics.jsonl"):
                continue
            text = tar.extractfile(member).read().decode()
            run = runs[parts[1].split("-")[1]][int(parts[2][len("seed") :])]
            if parts[3] == "final.json":
                run["final"] = json.loads(text)
            else:
                run["rows"] = [json.loads(line) for line in text.splitlines() if line.strip()]
    return runs


def _section(title: str) -> str:
    text = (ROOT / "docs/compare.md").read_text()
    start = text.index(f"## The measured `{title}` study")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start : end if end > 0 else None].split())


def _per_step_mean(runs: dict[int, dict], key: str, step: int) -> float:
    """Mean over the seeds that logged ``key`` at ``step`` (a skipped update logs none)."""
    values = [
        row[key]
        for run in runs.values()
        for row in run["rows"]
        if row.get("step") == step and row.get(key) is not None
    ]
    return float(np.mean(values))


@pytest.fixture(scope="module")
def klear():
    runs = _runs(KLEAR)
    assert sorted(runs) == ["clip_higher", "gppo"]
    assert all(sorted(r) == list(range(8, 56)) for r in runs.values())
    return runs["gppo"], runs["clip_higher"]


def test_klear_confirm_held_out_numbers_are_its_runs(klear):
    """avg@4 per arm, the paired difference by seed and problem (Welch-Satterthwaite t), its
    p-value and the seeds on each side, as docs/compare.md states them."""
    gppo, clip_higher = klear
    seeds = sorted(gppo)

    def avg(run):  # {problem id: c / n} at the final evaluation
        return {p["id"]: p["c"] / p["n"] for p in run["final"]["final_eval"]["problems"]}

    def pass4(run):  # {problem id: 1 - C(n - c, 4) / C(n, 4)}
        problems = run["final"]["final_eval"]["problems"]
        return {p["id"]: 1 - math.comb(p["n"] - p["c"], 4) / math.comb(p["n"], 4) for p in problems}

    def interval(score):
        """Mean difference, its 95% interval and p: variance over seeds plus over problems."""
        ids = sorted(score(gppo[seeds[0]]))
        a = np.array([[score(gppo[s])[i] for i in ids] for s in seeds])  # [S, P]
        b = np.array([[score(clip_higher[s])[i] for i in ids] for s in seeds])
        d = a - b
        seed_var = d.mean(1).var(ddof=1) / d.shape[0]
        problem_var = d.mean(0).var(ddof=1) / d.shape[1]
        var = seed_var + problem_var
        df = var**2 / (seed_var**2 / (d.shape[0] - 1) + problem_var**2 / (d.shape[1] - 1))
        half = student_t.ppf(0.975, df) * math.sqrt(var)
        p = 2 * student_t.sf(abs(d.mean()) / math.sqrt(var), df)
        text = f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}]"
        return a, b, d, text, p

    a, b, d, text, p = interval(avg)
    per_seed = d.mean(1)
    doc = _section("evidence-smollm2-klear-confirm")
    assert f"{a.mean():.3f} against {b.mean():.3f}" in doc
    assert f"**{text}** (p {p:.1e}" in doc
    assert f"pass@4 {interval(pass4)[3]}" in doc
    below, above = int((per_seed < 0).sum()), int((per_seed > 0).sum())
    assert f"below on {below} of the {len(seeds)} seeds and above on {above}" in doc
    std = f"{a.mean(1).std(ddof=1):.3f} against {b.mean(1).std(ddof=1):.3f}"
    assert std in doc


def test_klear_confirm_training_logs_are_its_runs(klear):
    """The training-accuracy difference (paired t over seeds of the mean over steps) and the
    per-step means the section reads from the logs, over the seeds that logged each step."""
    gppo, clip_higher = klear
    seeds = sorted(gppo)

    def mean_accuracy(run):
        return np.mean([r["reward/accuracy"] for r in run["rows"] if r.get("step", 0) >= 1])

    d = np.array([mean_accuracy(gppo[s]) - mean_accuracy(clip_higher[s]) for s in seeds])
    half = student_t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    doc = _section("evidence-smollm2-klear-confirm")
    assert f"{d.mean():+.3f} [{d.mean() - half:+.3f}, {d.mean() + half:+.3f}]" in doc

    def at(runs, key, step, digits):
        return f"{_per_step_mean(runs, key, step):.{digits}f}"

    entropy = [at(r, "policy/entropy", 6, 2) for r in (gppo, clip_higher)]
    assert f"{entropy[0]} against {entropy[1]} at step 6" in doc
    norm = [at(r, "optim/grad_norm", s, 1) for r in (gppo, clip_higher) for s in (1, 6)]
    assert (
        f"{norm[0]} at step 1 to {norm[1]} at step 6; Clip-Higher's {norm[2]} to {norm[3]}" in doc
    )
    kl = [at(r, "kl/old_approx", 6, 3) for r in (gppo, clip_higher)]
    assert re.search(rf"`kl/old_approx` {kl[0]} against {kl[1]} at step 6", doc)
