"""Verifiable rewards: verifiers registered by name and a batch scorer.

A verifier is a plain function ``(completion: str, reference) -> float``::

    from rlvr.rewards import Scorer, ScoringConfig, get_verifier

    verifier = get_verifier("math+format", correct=1.0, wrong=-1.0)   # ETR's +1/-1
    with Scorer(verifier, ScoringConfig(timeout_s=5.0, workers=2)) as scorer:
        scores = scorer(completions, references)    # Scores(values, status, errors, events)
    scores.metrics()    # verifier/failures, verifier/timeouts, verifier/math_rejected, ...

Built in: ``math``, ``reasoning_gym[:task]``, ``code`` (on :mod:`rlvr.sandbox`) and the
``+format`` modifier; new verifiers :func:`register` (:mod:`rlvr.rewards.registry`).
"""

from rlvr.rewards.extract import extract_answer
from rlvr.rewards.registry import (
    VERIFIERS,
    Verifier,
    available_verifiers,
    get_verifier,
    parse_spec,
    register,
)
from rlvr.rewards.scoring import Scorer, Scores, ScoringConfig, score_completions
from rlvr.sandbox.bounded import VerifierTimeout, time_limit

__all__ = [
    "VERIFIERS",
    "Scorer",
    "Scores",
    "ScoringConfig",
    "Verifier",
    "VerifierTimeout",
    "available_verifiers",
    "extract_answer",
    "get_verifier",
    "parse_spec",
    "register",
    "score_completions",
    "time_limit",
]
