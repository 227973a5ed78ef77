"""pass@k against exact combinatorics and brute-force enumeration; avg@k; summaries."""

from __future__ import annotations

import itertools
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr.evaluation import avg_at_k, best_at_k, mean_at_k, mean_pass_at_k, pass_at_k, summarize


def exact(n: int, c: int, k: int) -> float:
    return 1.0 - comb(n - c, k) / comb(n, k)


@pytest.mark.parametrize("n", range(1, 17))
def test_matches_the_binomial_formula(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(exact(n, c, k), abs=1e-12), (n, c, k)


def test_edge_cases():
    for n in (1, 5, 64):
        for k in range(1, n + 1):
            assert pass_at_k(n, 0, k) == 0.0  # c = 0
            assert pass_at_k(n, n, k) == 1.0  # c = n
        for c in range(1, n + 1):
            assert pass_at_k(n, c, n) == 1.0  # k = n with any correct sample
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3, abs=1e-15)  # pass@1 = c / n
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5, abs=1e-15)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9, abs=1e-15)  # 1 - C(3,3)/C(5,3) = 1 - 1/10


@pytest.mark.parametrize("n", range(1, 8))
def test_brute_force_subset_enumeration(n):
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(samples, k))
            expected = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
            assert avg_at_k(n, c, k) == pytest.approx(
                sum(sum(s) / k for s in subsets) / len(subsets), abs=1e-12
            )


def test_large_n_is_stable():
    # C(1000, 500) overflows float; the product form does not.
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5, abs=1e-12)
    assert pass_at_k(1000, 10, 1) == pytest.approx(0.01, abs=1e-15)


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_bounded_and_monotone(nck):
    n, c, k = nck
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert value >= c / n - 1e-12  # at least pass@1
    if k < n:
        assert pass_at_k(n, c, k + 1) >= value - 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= value - 1e-12


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_invalid_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_aliases_and_summary():
    assert best_at_k is pass_at_k and mean_at_k is avg_at_k
    counts = [(4, 0), (4, 1), (4, 4)]
    # avg: (0 + 1/4 + 1) / 3; pass@2: (0 + (1 - C(3,2)/C(4,2)) + 1) / 3 = (0 + 0.5 + 1) / 3
    assert summarize(counts, [2]) == pytest.approx(
        {"avg@2": 1.25 / 3, "pass@2": 0.5, "avg@4": 1.25 / 3}, abs=1e-12
    )
    assert mean_pass_at_k(counts, 4) == pytest.approx(2 / 3, abs=1e-12)
