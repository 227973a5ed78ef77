"""evaluate(): exact metrics from known completions, RNG and mode left untouched."""

from __future__ import annotations

import warnings

import pytest
import torch

import rlvr.evaluation.harness as harness
from rlvr.data import Example
from rlvr.evaluation import EvalConfig, evaluate
from rlvr.generation import SamplingConfig
from rlvr.rewards import Scorer, ScoringConfig, get_verifier

EXAMPLES = [
    Example(prompt="1+1?", reference="2", id="a", dataset="easy"),
    Example(prompt="3/4 as a decimal?", reference="0.75", id="b", dataset="easy"),
    Example(prompt="x^2=4, x>0?", reference="2", id="c", dataset="hard"),
]
# n = 4 completions per problem: 1, 4 and 0 correct.
TEXTS = {
    "a": ["\\boxed{2}", "\\boxed{3}", "no idea", "\\boxed{5}"],
    "b": ["\\boxed{3/4}", "Answer: 0.75", "The answer is $\\frac{3}{4}$.", "\\boxed{\\dfrac34}"],
    # (x+1)^1000 passes the math verifier's screen but keeps SymPy busy for far longer than
    # the scorer's limit: a timeout. (A tower such as 9^{9^{9}} is rejected at once instead.)
    "c": ["\\boxed{-2}", "\\boxed{4}", "", "\\boxed{(x+1)^{1000}}"],
}


def fake_sample(sampler, prompt_ids, config, **_):
    texts = [t for ex in EXAMPLES for t in TEXTS[ex.id]]
    return harness.Samples(texts, [len(t) for t in texts], [t == "" for t in texts])


def test_metrics_from_known_completions(monkeypatch, tiny_model):
    model, tokenizer = tiny_model
    monkeypatch.setattr(harness, "sample", fake_sample)
    config = EvalConfig(
        n=4, ks=(1, 2), scoring=ScoringConfig(timeout_s=1.0, workers=1, kill_grace_s=0.5)
    )
    report = evaluate(model, tokenizer, EXAMPLES, get_verifier("math", wrong=-1.0), config)
    assert [p.c for p in report.problems] == [1, 4, 0]
    # avg: (1/4 + 1 + 0) / 3; pass@2: ((1 - C(3,2)/C(4,2)) + 1 + 0) / 3 = 1.5 / 3
    m = report.metrics
    assert m["avg@1"] == pytest.approx(1.25 / 3, abs=1e-12) and m["avg@4"] == m["avg@1"]
    assert m["pass@1"] == pytest.approx(1.25 / 3, abs=1e-12)
    assert m["pass@2"] == pytest.approx(0.5, abs=1e-12)
    assert m["score/mean"] == pytest.approx((1 - 3 + 4 - 4) / 12, abs=1e-12)
    assert m["verifier/timeouts"] == 1.0 and report.problems[2].status[3] == "timeout"
    assert m["response/clipped_frac"] == pytest.approx(1 / 12, abs=1e-12)
    assert report.per_dataset["easy"]["avg@4"] == pytest.approx(1.25 / 2, abs=1e-12)
    assert report.per_dataset["hard"]["pass@2"] == 0.0
    assert report.problems[0].scores == [1.0, -1.0, -1.0, -1.0]
    # maj@k: a's votes 2 (right), 3, 5 and one without an answer; b's four spellings of 3/4 are
    # one answer; c's answers are all wrong. a: maj@1 1/4, maj@2 ({2,3} 1/2, {2,-} 1, {2,5} 1/2
    # of 6 pairs) 1/3; maj@k for the ks asked (as pass@k), not for n as avg@n
    assert report.problems[0].answers == ["2", "3", None, "5"]
    assert len(set(report.problems[1].answers)) == 1
    assert m["maj@1"] == pytest.approx(1.25 / 3, abs=1e-12)
    assert m["maj@2"] == pytest.approx((1 / 3 + 1) / 3, abs=1e-12)
    assert report.per_dataset["easy"]["maj@2"] == pytest.approx((1 / 3 + 1) / 2, abs=1e-12)
    # the standard error over problems as the others': per problem 1/3, 1, 0 about their mean
    # 4/9: sqrt((1/81 + 25/81 + 16/81) / 2 / 3) = sqrt(7) / 9
    assert report.stderr["maj@2"] == pytest.approx(7**0.5 / 9, abs=1e-12)
    assert [k for k in m if "@" in k] == [
        "avg@1", "pass@1", "maj@1", "avg@2", "pass@2", "maj@2", "avg@4",
    ]  # fmt: skip
    assert list(report.stderr) == [k for k in m if "@" in k]


def test_real_sampling_is_seeded_and_leaves_state_alone(tiny_model):
    model, tokenizer = tiny_model
    model.train()
    config = EvalConfig(
        n=2, ks=(1, 2), sampling=SamplingConfig(max_new_tokens=6), batch_size=2, seed=7
    )
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    with Scorer("math") as scorer:
        first = evaluate(model, tokenizer, EXAMPLES, "math", config, scorer=scorer)
    assert torch.equal(torch.rand(3), expected_next)  # the caller's RNG stream is untouched
    assert model.training
    second = evaluate(model, tokenizer, EXAMPLES, "math", config)
    assert [p.completions for p in first.problems] == [p.completions for p in second.problems]
    assert all(len(p.completions) == 2 and all(x <= 6 for x in p.lengths) for p in first.problems)
    assert set(first.to_dict()) == {
        "metrics",
        "per_dataset",
        "stderr",
        "per_dataset_stderr",
        "config",
        "prompts",
        "problems",
    }


def test_config_validation():
    with pytest.raises(ValueError, match="every k"):
        EvalConfig(n=4, ks=(8,))
    with pytest.raises(ValueError, match="n must be"):
        EvalConfig(n=0, ks=(1,))


def test_several_greedy_samples_are_warned():
    greedy = SamplingConfig(max_new_tokens=8, temperature=0.0)
    with pytest.warns(UserWarning, match="4 samples per problem at temperature 0"):
        EvalConfig(n=4, ks=(1, 4), sampling=greedy)
    EvalConfig(n=1, ks=(1,), sampling=greedy)  # one greedy sample: nothing to say


def test_a_verifier_whose_correct_score_is_not_above_wrong_is_refused(tiny_model):
    model, tokenizer = tiny_model
    with pytest.raises(ValueError, match="correct score"):
        evaluate(
            model, tokenizer, EXAMPLES, get_verifier("math", correct=0.0), EvalConfig(n=1, ks=(1,))
        )


def test_a_partial_test_pass_rate_is_a_score_not_a_solved_problem():
    """With the soft code reward (the share of tests passed) a problem counts in avg@k only
    when every test passes; the mean pass rate is score/mean (README and docs/pipelines.md
    called the code recipe's avg@1 a mean pass rate)."""
    from rlvr.rewards import Scores

    verifier = get_verifier("code")
    examples = [Example(prompt="f?", reference={"inputs": [], "outputs": []}, id=i, dataset="c")
                for i in ("p", "q")]  # fmt: skip
    samples = harness.Samples(["a", "b"], [1, 1], [False, False])

    def scorer(texts, references):
        return Scores(values=[0.8, 1.0], status=["ok", "ok"])

    config = EvalConfig(n=1, ks=(1,))
    problems = harness.score_problems(examples, verifier, samples, config, scorer)
    report = harness.build_report(problems, config)
    assert report.metrics["avg@1"] == 0.5  # one of two problems passes every test
    assert report.metrics["score/mean"] == pytest.approx(0.9, abs=1e-12)
    # code has no answer to vote on: no maj@k, and no error
    assert not any(k.startswith("maj@") for k in [*report.metrics, *report.stderr])
    assert [p.answers for p in problems] == [[], []]


def _keyed(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: right when the completion's first word is the reference."""
    return correct if completion.split()[:1] == [reference] else wrong


def _first_word(completion, reference, **options):
    """Its answer key: the first word; none for an empty completion, and a bug on "boom"."""
    if completion.startswith("boom"):
        raise RuntimeError("broken key")
    return (completion.split() or [None])[0]


def test_a_verifier_of_your_own_votes_only_with_an_answer_key():
    from rlvr.rewards import Scores, register
    from rlvr.rewards.verifier import Verifier

    register("first_word_test")(_keyed)
    plain = get_verifier("first_word_test")
    keyed = Verifier("first_word_test", _keyed)
    assert not plain.votes
    examples = [Example(prompt="?", reference="4", id="p", dataset="d")]
    texts = ["4 yes", "5 no", "5 no again", "", "boom"]
    samples = harness.Samples(texts, [1] * 5, [False] * 5)
    config = EvalConfig(n=5, ks=(1, 5))

    def scorer(completions, references):
        return Scores(
            values=[plain(c, r) for c, r in zip(completions, references, strict=True)],
            status=["ok"] * 5,
        )

    without = harness.build_report(
        harness.score_problems(examples, plain, samples, config, scorer), config
    )
    assert not any(k.startswith("maj@") for k in without.metrics)
    _keyed.answer_key = _first_word
    try:
        assert keyed.votes and keyed.answer_key("4 yes", "4") == "4"
        with pytest.warns(UserWarning, match="no answer key for 1 of 5 .*RuntimeError: broken key"):
            problems = harness.score_problems(examples, keyed, samples, config, scorer)
    finally:
        del _keyed.answer_key
    assert problems[0].answers == ["4", "5", "5", None, None]
    report = harness.build_report(problems, config)
    assert report.metrics["maj@1"] == pytest.approx(1 / 5) and report.metrics["maj@5"] == 0.0


def test_votes_follow_the_verifiers_judgement_not_only_the_keys():
    """0.333333 and 1/3 are one answer to the math verifier, right or wrong, but two keys. Of
    4 votes, right 1 + 1 lost to 2 wrong (maj@4 0, now a tie, 1/2), and wrong 1 + 1 lost to
    2 right (maj@4 1, now a tie, 1/2)."""
    from rlvr.evaluation.majority import maj_at_k

    examples = [
        Example(prompt="?", reference=r"\frac13", id="right", dataset="d"),
        Example(prompt="?", reference="0.5", id="wrong", dataset="d"),
    ]
    texts = [r"\boxed{0.333333}", r"\boxed{1/3}", r"\boxed{2}", r"\boxed{2}"]
    texts += [r"\boxed{0.333333}", r"\boxed{1/3}", r"\boxed{0.5}", r"\boxed{1/2}"]
    samples = harness.Samples(texts, [1] * 8, [False] * 8)
    config = EvalConfig(n=4, ks=(4,), scoring=ScoringConfig(workers=0))
    problems = harness.score_problems(examples, get_verifier("math"), samples, config)
    assert [p.correct for p in problems] == [[True, True, False, False], [False, False, True, True]]
    assert problems[1].answers[0] == problems[1].answers[1]  # one wrong vote
    assert [maj_at_k(p.answers, p.correct, 4) for p in problems] == [0.5, 0.5]
    assert harness.build_report(problems, config).metrics["maj@4"] == 0.5


def test_a_score_above_the_correct_score_is_refused_not_counted_correct():
    """`rlvr eval --verifier mymod.five` (a plain verifier returning 5) gave avg@1 1.0 with
    score/mean 5.0."""
    from rlvr.rewards import Scores

    examples = [Example(prompt="1+1?", reference="2", id="p", dataset="d")]
    samples = harness.Samples(["a", "b"], [1, 1], [False, False])
    config = EvalConfig(n=2, ks=(1,))

    def scorer(texts, references):
        return Scores(values=[5.0, -3.0], status=["ok", "ok"])

    with pytest.raises(ValueError, match=r"'math' scored a completion 5, outside \[0, 1\]"):
        harness.score_problems(examples, get_verifier("math"), samples, config, scorer)


@pytest.mark.parametrize(
    ("spec", "options", "low", "accepted"),
    [
        ("math", {}, -0.5, False),  # below wrong: it skewed score/mean
        ("math", {"wrong": -1.0}, -1.0, True),
        ("math+format", {"format_penalty": -2.0}, -2.0, True),  # the penalty is a score it gives
        ("math+format", {"format_penalty": -2.0}, -2.5, False),
    ],
)
def test_a_score_below_the_lowest_score_is_refused(spec, options, low, accepted):
    from rlvr.rewards import Scores

    examples = [Example(prompt="1+1?", reference="2", id="p", dataset="d")]
    samples = harness.Samples(["a", "b"], [1, 1], [False, False])
    config = EvalConfig(n=2, ks=(1,))

    def scorer(texts, references):
        return Scores(values=[1.0, low], status=["ok", "ok"])

    verifier = get_verifier(spec, **options)
    if accepted:
        harness.score_problems(examples, verifier, samples, config, scorer)
    else:
        with pytest.raises(ValueError, match=f"scored a completion {low:g}, outside"):
            harness.score_problems(examples, verifier, samples, config, scorer)


def test_prompts_past_the_context_are_warned(tiny_model):
    """A prompt longer than the model's context was sampled past it without a word."""
    model, tokenizer = tiny_model
    config = EvalConfig(n=1, ks=(1,), sampling=SamplingConfig(max_new_tokens=4))
    long = Example(prompt=" + ".join(["1"] * 40) + " =", reference="40", id="l", dataset="d")
    short, _ = (len(ids) for ids in harness.encode_prompts(tokenizer, [EXAMPLES[0], long], config))
    model.config.max_position_embeddings = context = short + 4
    with pytest.warns(UserWarning, match=r"^1 of 2 prompts \(the longest \d+ tokens\) plus "
                      rf"max_new_tokens=4 pass the model's context of {context} tokens"):  # fmt: skip
        evaluate(model, tokenizer, [EXAMPLES[0], long], "math", config)


def test_a_killed_evaluation_continues_from_its_kept_batches_with_the_same_numbers(
    tiny_model, tmp_path
):
    """Ctrl-C (or a pre-emption) lost every sampled batch: the evaluation started over."""
    from rlvr.evaluation.partial import PartialSamples
    from rlvr.generation import make_sampler

    model, tokenizer = tiny_model
    config = EvalConfig(n=2, ks=(1, 2), sampling=SamplingConfig(max_new_tokens=6), batch_size=1)
    whole = evaluate(model, tokenizer, EXAMPLES, "math", config)

    class KilledAtSecondBatch:
        def __init__(self):
            self.inner, self.calls = make_sampler("lean", model, tokenizer), 0

        def generate(self, *args, **kwargs):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return self.inner.generate(*args, **kwargs)

    keep = PartialSamples(tmp_path / "eval.partial.pt", {"model": "tiny"})
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            model, tokenizer, EXAMPLES, "math", config, sampler=KilledAtSecondBatch(), keep=keep
        )
    kept, _ = keep.load()
    assert len(kept["texts"]) == 2  # the first problem's two completions
    torch.rand(5)  # the caller's RNG moved on meanwhile
    told: list[tuple[int, int]] = []
    again = evaluate(
        model, tokenizer, EXAMPLES, "math", config, keep=keep, progress=lambda *a: told.append(a)
    )
    assert again.to_dict() == whole.to_dict()
    assert told == [(1, 3), (2, 3), (3, 3)]  # from the kept problem on, after each batch
    with pytest.raises(ValueError, match=r"other settings \(model\); run it with its own"):
        PartialSamples(keep.path, {"model": "other"}).load()


def test_problems_repeating_a_dataset_and_id_are_warned_of():
    """A held-out file naming one problem twice was evaluated without a word: a row given twice
    counted twice in avg@k and its standard error, and the report could never be paired."""
    twice = [*EXAMPLES, EXAMPLES[0], EXAMPLES[2]]
    with pytest.warns(UserWarning, match=r"2 of 5 problems repeat .* \(first: easy/a\)"):
        harness.warn_repeated_problems(twice)
    other_set = Example(prompt="1+1?", reference="2", id="a", dataset="other")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same id in another dataset is another problem
        harness.warn_repeated_problems([*EXAMPLES, other_set])


def test_the_report_fingerprints_the_prompts_as_the_model_was_given_them(tiny_model):
    """``rlvr eval --against`` compares the prompts as tokenised (the system prompt, chat
    template, tokenizer, template or prompt field can each change them): the fingerprint is
    of each problem's token ids, whatever the order of the problems."""
    _, tokenizer = tiny_model
    ids = harness.encode_prompts(tokenizer, EXAMPLES, EvalConfig())
    record = harness.prompts_record(tokenizer, EXAMPLES, ids)
    assert record["chat_template"] is bool(tokenizer.chat_template) is True
    assert harness.prompts_record(tokenizer, EXAMPLES[::-1], ids[::-1]) == record
    briefly = harness.encode_prompts(tokenizer, EXAMPLES, EvalConfig(system_prompt="Be brief."))
    other = harness.prompts_record(tokenizer, EXAMPLES, briefly)
    assert other["token_ids_sha256"] != record["token_ids_sha256"]
    assert len(record["token_ids_sha256"]) == 64
