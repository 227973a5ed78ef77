"""RL with the ``code`` reward on generated code tasks; scoring overlapped with generation."""

import json
from pathlib import Path

import pytest
import torch

from rlvr.data.code_tasks import code_task_rows
from rlvr.models import load_model
from rlvr.sandbox import SandboxResult, SandboxStatus
from rlvr.train.loop import sandbox_notes, train
from rlvr.train.metrics import read_metrics
from rlvr.train.preflight import refuse_unconfined


@pytest.fixture()
def code_file(tmp_path):
    """Four code task problems (the ``code_tasks`` field mapping reads them)."""
    path = tmp_path / "code.jsonl"
    rows = code_task_rows("all", size=4, seed=0, config={"max_level": 1, "tests": 2})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _code_config(train_config, code_file, *extra, out):
    return train_config(
        f"data.train={code_file}",
        f"data.eval={code_file}",
        "data.fields=code_tasks",
        "data.max_prompt_tokens=512",
        "reward.verifier=code",
        "objective.name=gppo",
        "rollout.filter_zero_advantage=true",
        "reward.allow_unconfined=true",  # these runs test training, on whatever sandbox is here
        *extra,
        out=out,
    )


def test_code_reward_trains_end_to_end_and_counts_sandbox_failures(
    train_config, code_file, monkeypatch
):
    """Real sandbox runs for most completions; one program in three meets a broken sandbox."""
    import rlvr.rewards.code as code

    real, calls = code.run_untrusted, []

    def flaky(source, **kwargs):
        calls.append(source)
        if len(calls) % 3 == 0:
            return SandboxResult(
                SandboxStatus.SANDBOX_ERROR, None, None, "", "no sandbox", False, 0.0, 0.0
            )
        return real(source, **kwargs)

    monkeypatch.setattr(code, "run_untrusted", flaky)
    # workers=0 scores in this process, where the patch applies; tests run one at a time.
    cfg = _code_config(train_config, code_file, "reward.workers=0", out="code")
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    steps = [r for r in rows if r["step"] >= 1]
    assert len(steps) == 2 and calls
    failures = sum(r["verifier/failures"] for r in steps)
    sandbox = sum(r["verifier/sandbox_errors"] for r in steps)
    assert failures >= 1 and sandbox == failures  # every failure here is the sandbox's
    assert all(0.0 <= r["reward/mean"] <= 1.0 for r in steps)
    assert result.model_dir is not None


def test_overlapped_scoring_gives_the_sequential_results(train_config, code_file):
    """Chunks scored while the next generates: same completions, rewards and updates."""
    results = {}
    for overlap in (False, True):
        cfg = _code_config(
            train_config,
            code_file,
            "rollout.generation_batch_size=4",  # 2 prompts x G=4: two generation calls per round
            "reward.workers=2",
            f"rollout.overlap_scoring={str(overlap).lower()}",
            out=f"overlap-{overlap}",
        )
        run = train(cfg)
        rows = [r for r in read_metrics(run.run_dir / "metrics.jsonl") if r["step"] >= 1]
        samples = [json.loads(x) for x in (run.run_dir / "samples.jsonl").read_text().splitlines()]
        model, _ = load_model(str(run.model_dir))
        results[overlap] = (rows, samples, [p.detach().clone() for p in model.parameters()])
    (rows_a, samples_a, params_a), (rows_b, samples_b, params_b) = results[False], results[True]
    assert [s["completion"] for s in samples_a] == [s["completion"] for s in samples_b]
    for a, b in zip(rows_a, rows_b, strict=True):
        for key in ("reward/mean", "reward/std", "verifier/failures", "response/length_mean"):
            assert a[key] == b[key], key
    assert all(torch.equal(x, y) for x, y in zip(params_a, params_b, strict=True))


class _Chunks:
    """Fake sampler: chunk k's completions are ``"k-i"``; chunk 1 waits until chunk 0 is scored."""

    def __init__(self, scored_first, timeout: float = 20.0) -> None:
        self.calls, self.scored_first, self.timeout = 0, scored_first, timeout

    def generate(self, prompt_ids, *, n, sampling):
        from rlvr.generation.base import Generation

        k, self.calls = self.calls, self.calls + 1
        if k == 1:  # sequential scoring would never set the event before this call returns
            assert self.scored_first.wait(self.timeout), "chunk 0 was not scored during chunk 1"
        rows = len(prompt_ids) * n
        return Generation(
            prompt_ids=torch.ones(rows, 2, dtype=torch.long),
            prompt_mask=torch.ones(rows, 2, dtype=torch.long),
            response_ids=torch.full((rows, 3), k + 2),
            response_mask=torch.ones(rows, 3, dtype=torch.long),
            truncated=torch.zeros(rows, dtype=torch.bool),
            texts=[f"{k}-{i}" for i in range(rows)],
            prompt_index=[i // n for i in range(rows)],
        )


class _Scorer:
    """Fake scorer: reward = the completion's chunk number; sets the event after chunk 0."""

    def __init__(self, event) -> None:
        self.event, self.batches = event, []

    def __call__(self, texts, references):
        from rlvr.rewards import Scores

        self.batches.append(list(texts))
        self.event.set()
        values = [
            float(t.split("-")[0]) + 0.5 * (r == "x")
            for t, r in zip(texts, references, strict=True)
        ]
        return Scores(values=values, status=["ok"] * len(texts), errors=[None] * len(texts))


@pytest.mark.parametrize("overlap", [True, False])
def test_sample_round_scores_chunk_i_while_chunk_i_plus_1_generates(train_config, overlap):
    import threading

    from rlvr.train.prompts import Prompt
    from rlvr.train.rollout import sample_round

    cfg = train_config(
        "rollout.generation_batch_size=4", f"rollout.overlap_scoring={str(overlap).lower()}"
    )
    event = threading.Event()
    if not overlap:
        event.set()  # the sequential path scores chunk 0 before generating chunk 1 anyway
    prompts = [Prompt(ids=(1, 2), reference=ref, example=None) for ref in ("x", "y")]
    scorer = _Scorer(event)
    tokenizer = type("T", (), {"pad_token_id": 0})()
    rnd = sample_round(_Chunks(event), tokenizer, scorer, prompts, cfg)
    assert scorer.batches == [[f"0-{i}" for i in range(4)], [f"1-{i}" for i in range(4)]]
    assert rnd.texts == scorer.batches[0] + scorer.batches[1]
    assert rnd.rewards.tolist() == [0.5] * 4 + [1.0] * 4  # chunk 0 is prompt "x", chunk 1 "y"
    assert rnd.seqs.input_ids[:4, 2:].eq(2).all() and rnd.seqs.input_ids[4:, 2:].eq(3).all()
    assert set(rnd.seconds) == {"generate", "score"}


def test_the_fake_sampler_catches_a_sequential_round(train_config):
    """Without overlap nothing scores chunk 0 while chunk 1 generates: the check above fires."""
    import threading

    from rlvr.train.prompts import Prompt
    from rlvr.train.rollout import sample_round

    cfg = train_config("rollout.generation_batch_size=4", "rollout.overlap_scoring=false")
    event = threading.Event()
    sampler = _Chunks(event, timeout=0.2)
    scorer = _Scorer(threading.Event())  # sets another event: chunk 1 waits in vain
    prompts = [Prompt(ids=(1, 2), reference=ref, example=None) for ref in ("x", "y")]
    with pytest.raises(AssertionError, match="not scored during chunk 1"):
        sample_round(sampler, type("T", (), {"pad_token_id": 0})(), scorer, prompts, cfg)


def test_a_run_refuses_a_sandbox_that_cannot_hide_its_files_unless_allowed():
    for mode in (None, "bwrap", "fallback-landlock"):
        refuse_unconfined(mode, allowed=False)
    for mode in ("fallback-uid", "fallback-minimal"):  # world-readable files, or all of yours
        refuse_unconfined(mode, allowed=True)
        with pytest.raises(ValueError, match=rf"\({mode}\).*reward\.allow_unconfined=true"):
            refuse_unconfined(mode, allowed=False)


def test_a_run_refuses_before_anything_loads(train_config, monkeypatch):
    """The refusal comes first: no model is loaded and no run directory is made."""
    import rlvr.train.loop as loop
    import rlvr.train.preflight as preflight

    monkeypatch.setattr(preflight, "sandbox_isolation", lambda verifier: "fallback-minimal")
    monkeypatch.setattr(loop, "load_policy", lambda *a: pytest.fail("the model was loaded"))
    cfg = train_config("reward.verifier=code", out="refused")
    with pytest.raises(ValueError, match="allow_unconfined"):
        train(cfg)
    assert not Path(cfg.log.output_dir).exists()
    preflight.preflight(cfg, device=False)  # a dry run for another machine is not refused


def test_a_run_warns_when_programs_can_read_its_files():
    assert sandbox_notes(None) == []
    assert sandbox_notes("bwrap") == ["code sandbox isolation: bwrap"]
    assert sandbox_notes("fallback-landlock") == ["code sandbox isolation: fallback-landlock"]
    for mode in ("fallback-uid", "fallback-minimal"):
        notes = sandbox_notes(mode)
        assert notes[0] == f"code sandbox isolation: {mode}"
        assert notes[1].startswith("warning:") and "references" in notes[1]
