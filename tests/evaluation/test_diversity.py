"""distinct-n and self-BLEU over the samples of one problem, by hand."""

import math

import pytest

from rlvr.evaluation.diversity import bleu, distinct_n, diversity, mean_diversity, self_bleu, words
from rlvr.evaluation.harness import EvalConfig, ProblemResult, build_report


def test_words_split_punctuation():
    assert words("1 + 2 = 3.") == ["1", "+", "2", "=", "3", "."]
    assert words("") == []


def test_distinct_n_by_hand():
    texts = ["a b a", "a c"]  # unigrams a b a a c: 3 distinct of 5; bigrams ab ba ac: 3 of 3
    assert distinct_n(texts, 1) == pytest.approx(3 / 5)
    assert distinct_n(texts, 2) == pytest.approx(1.0)
    assert distinct_n(["a", "b"], 2) is None  # no bigram at all


def test_bleu_by_hand():
    hyp = ["a", "b", "c", "d", "e"]
    ref = ["a", "b", "c", "x", "e", "f"]
    # clipped matches: 1-grams 4/5; 2-grams ab bc: 2/4 -> (2+1)/(4+1); 3-grams abc: 1/3 -> 2/4;
    # 4-grams none: 0/2 -> 1/3. Brevity: hyp 5 < ref 6 -> exp(1 - 6/5).
    expected = math.exp(1 - 6 / 5) * (4 / 5 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert bleu(hyp, [ref]) == pytest.approx(expected, abs=1e-12)


def test_bleu_clips_counts_by_the_best_single_reference():
    # "a" twice in the hypothesis; one reference has it twice, so both count
    hyp = ["a", "a"]
    assert bleu(hyp, [["a"], ["a", "a"]]) == pytest.approx(1.0)
    # closest reference length 2 (no brevity penalty); with only ["a"]: 1 of 2 unigrams matched
    # and a brevity of 1 (longer than the reference)
    expected = (1 / 2 * (0 + 1) / (1 + 1) * 1 * 1) ** 0.25
    assert bleu(hyp, [["a"]]) == pytest.approx(expected)


def test_self_bleu_extremes_and_average():
    assert self_bleu(["x y z w", "x y z w", "x y z w"]) == pytest.approx(1.0)
    assert self_bleu(["a b", "c d"]) == 0.0
    assert self_bleu(["only one"]) is None
    texts = ["a b c d e", "a b c x e f"]
    both = (bleu(words(texts[0]), [words(texts[1])]) + bleu(words(texts[1]), [words(texts[0])])) / 2
    assert self_bleu(texts) == pytest.approx(both)


def test_empty_sample_scores_zero_as_hypothesis():
    assert bleu([], [["a"]]) == 0.0
    assert self_bleu(["", "a b"]) == 0.0


def test_diversity_in_the_eval_report():
    def problem(pid, texts):
        return ProblemResult(
            id=pid,
            dataset="d",
            prompt="p",
            reference="r",
            scores=[1.0] * len(texts),
            correct=[True] * len(texts),
            lengths=[3] * len(texts),
            truncated=[False] * len(texts),
            status=["ok"] * len(texts),
            diversity=diversity(texts),
        )

    same, mixed = ["7", "7"], ["7", "8"]
    report = build_report([problem("a", same), problem("b", mixed)], EvalConfig(n=2, ks=(1,)))
    assert report.metrics["diversity/distinct_1"] == pytest.approx((1 / 2 + 1) / 2)
    assert report.metrics["diversity/self_bleu"] == pytest.approx((1.0 + 0.0) / 2)
    assert "diversity/distinct_2" not in report.metrics  # single words: no bigram anywhere
    assert report.to_dict()["problems"][0]["diversity"]["self_bleu"] == 1.0
    assert mean_diversity([]) == {}


def test_fast_self_bleu_equals_the_definition():
    import random

    rng = random.Random(0)
    vocab = ["1", "2", "3", "+", "=", "<think>", "so", "the", "answer", "is"]
    for trial in range(30):
        texts = [
            " ".join(rng.choices(vocab, k=rng.randint(0, 12))) for _ in range(rng.randint(2, 6))
        ]
        tokens = [words(t) for t in texts]
        slow = [bleu(tokens[i], tokens[:i] + tokens[i + 1 :]) for i in range(len(texts))]
        assert self_bleu(texts) == pytest.approx(sum(slow) / len(slow), abs=1e-12), trial
