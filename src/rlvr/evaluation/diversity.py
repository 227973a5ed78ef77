"""Answer diversity over the ``n`` samples of one problem: distinct-n and self-BLEU.

APMPO (app. K.6, tab. 4) reports Self-BLEU over the 8 solutions sampled per problem:
"the BLEU-4 score of each generated solution was calculated against others in the same
sampled group"; lower means less lexical overlap. We compute, per problem:

- ``distinct_n``: distinct word ``n``-grams over all word ``n``-grams of the problem's
  samples taken together (Li et al., 2016, per problem rather than per corpus); 1 when
  no ``n``-gram repeats, ``1/n_samples`` when every sample is the same.
- ``self_bleu``: the mean over samples ``i`` of BLEU-4 (Papineni et al., 2002) of sample
  ``i`` against the other samples as references: clipped ``n``-gram precisions for
  ``n = 1..4`` (each ``n``-gram counted at most as often as the most it appears in one
  reference), geometric mean with uniform weights, brevity penalty against the reference
  length closest to the sample's (the shorter on a tie).

Choices the papers leave open, stated here:

1. Words are ``\\w+`` runs and single punctuation characters (``"3+4=7"`` is
   ``3 + 4 = 7``), so the metric does not depend on the model's tokenizer.
2. Samples are short, so higher-order matches are often absent: precisions for
   ``n >= 2`` are add-one smoothed, ``(matches + 1) / (total + 1)`` (Lin and Och, 2004);
   the unigram precision is not smoothed, so samples sharing no word score 0.
3. An empty sample has BLEU 0 as a hypothesis and is an ordinary (empty) reference.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

WORD = re.compile(r"\w+|[^\w\s]")
BLEU_ORDER = 4


def words(text: str) -> list[str]:
    """Word and punctuation tokens of ``text``.

    >>> words("<think>3+4=7</think> 7")
    ['<', 'think', '>', '3', '+', '4', '=', '7', '<', '/', 'think', '>', '7']
    """
    return WORD.findall(text)


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """Counts of the ``n``-grams of ``tokens``.

    >>> ngrams(["a", "b", "a", "b"], 2)
    Counter({('a', 'b'): 2, ('b', 'a'): 1})
    """
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct ``n``-grams / all ``n``-grams over ``texts`` (``None`` when there are none).

    >>> distinct_n(["a b c", "a b d"], 1)  # a, b, c, d distinct out of 6
    0.6666666666666666
    >>> distinct_n(["same text", "same text"], 2)
    0.5
    """
    total: Counter = Counter()
    for text in texts:
        total.update(ngrams(words(text), n))
    count = sum(total.values())
    return len(total) / count if count else None


def _precision(matches: int, total: int, smooth: bool) -> float:
    """Clipped ``n``-gram precision (add-one when ``smooth``)."""
    if smooth:
        return (matches + 1) / (total + 1)
    return matches / total if total else 0.0


def _combine(precisions: list[float], length: int, ref_lengths: Sequence[int]) -> float:
    """Geometric mean of the precisions times the brevity penalty."""
    if length == 0 or not ref_lengths or min(precisions) == 0:
        return 0.0
    closest = min(ref_lengths, key=lambda r: (abs(r - length), r))
    brevity = 1.0 if length > closest else math.exp(1 - closest / length)
    return brevity * math.exp(sum(math.log(p) for p in precisions) / len(precisions))


def bleu(hypothesis: Sequence[str], references: Sequence[Sequence[str]]) -> float:
    """Smoothed sentence BLEU-4 of ``hypothesis`` tokens against ``references`` (see module doc).

    >>> bleu(["a", "b", "c", "d"], [["a", "b", "c", "d"]])
    1.0
    >>> bleu(["x", "y"], [["a", "b"]])
    0.0
    """
    precisions = []
    for n in range(1, BLEU_ORDER + 1):
        hyp, refs = ngrams(hypothesis, n), [ngrams(r, n) for r in references]
        matches = sum(min(c, max((r[g] for r in refs), default=0)) for g, c in hyp.items())
        precisions.append(_precision(matches, sum(hyp.values()), smooth=n > 1))
    return _combine(precisions, len(hypothesis), [len(r) for r in references])


def _best_two(counts: list[Counter]) -> dict[tuple, tuple[int, int, int]]:
    """``n``-gram -> (highest count, the text holding it, second highest count) over ``counts``."""
    best: dict[tuple, tuple[int, int, int]] = {}
    for i, counter in enumerate(counts):
        for gram, c in counter.items():
            top, who, second = best.get(gram, (0, -1, 0))
            best[gram] = (c, i, top) if c > top else (top, who, max(second, c))
    return best


def self_bleu(texts: Sequence[str]) -> float | None:
    """Mean BLEU-4 of each text against all the others (``None`` for fewer than 2 texts).

    Equal to ``mean_i bleu(words(texts[i]), [words(t) for t in the others])``, computed in time
    linear in the number of texts per ``n``-gram: the clipping count of an ``n``-gram against
    the others is the largest count among the other texts, i.e. the highest count overall
    unless text ``i`` holds it, then the second highest.

    >>> self_bleu(["the sum is 7", "the sum is 7"])
    1.0
    """
    if len(texts) < 2:
        return None
    tokens = [words(t) for t in texts]
    lengths = [len(t) for t in tokens]
    precisions: list[list[float]] = [[] for _ in tokens]
    for n in range(1, BLEU_ORDER + 1):
        counts = [ngrams(t, n) for t in tokens]
        best = _best_two(counts)
        for i, counter in enumerate(counts):
            matches = 0
            for gram, c in counter.items():
                top, who, second = best[gram]
                matches += min(c, second if who == i else top)
            precisions[i].append(_precision(matches, sum(counter.values()), smooth=n > 1))
    scores = [
        _combine(precisions[i], lengths[i], lengths[:i] + lengths[i + 1 :])
        for i in range(len(tokens))
    ]
    return sum(scores) / len(scores)


class Diversity(NamedTuple):
    """Diversity of one problem's samples (``None``: undefined for these samples)."""

    distinct_1: float | None
    distinct_2: float | None
    self_bleu: float | None

    def metrics(self) -> dict[str, float]:
        """``{"diversity/distinct_1": ..., ...}`` without the undefined ones."""
        return {f"diversity/{k}": v for k, v in self._asdict().items() if v is not None}


def diversity(texts: Sequence[str]) -> Diversity:
    """distinct-1, distinct-2 and self-BLEU of one problem's ``n`` samples."""
    return Diversity(distinct_n(texts, 1), distinct_n(texts, 2), self_bleu(texts))


def mean_diversity(per_problem: Sequence[Diversity]) -> dict[str, float]:
    """Each diversity metric averaged over the problems where it is defined."""
    values: dict[str, list[float]] = {}
    for item in per_problem:
        for key, value in item.metrics().items():
            values.setdefault(key, []).append(value)
    return {key: sum(v) / len(v) for key, v in values.items()}
