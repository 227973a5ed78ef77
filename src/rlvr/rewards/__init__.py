"""Verifiable rewards: verifiers registered by name and a batch scorer.

A verifier is a plain function ``(completion: str, reference) -> float``. Build one from
a spec string and score batches with a time limit and failure accounting::

    from rlvr.rewards import Scorer, ScoringConfig, get_verifier

    verifier = get_verifier("math+format", correct=1.0, wrong=-1.0)   # ETR's +1/-1
    with Scorer(verifier, ScoringConfig(timeout_s=5.0, workers=2)) as scorer:
        scores = scorer(completions, references)    # Scores(values, status, errors, events)
    scores.metrics()    # verifier/failures, verifier/timeouts, verifier/math_rejected, ...

Built-in verifiers: ``math`` (:mod:`rlvr.rewards.math`), ``reasoning_gym[:task]``
(:mod:`rlvr.rewards.reasoning_gym`), ``code`` (:mod:`rlvr.rewards.code`, when present),
and the ``+format`` modifier (:mod:`rlvr.rewards.format`). New verifiers register with
:func:`register` (see :mod:`rlvr.rewards.registry`) and may count events
(:mod:`rlvr.rewards.events`). The ``code`` verifier's sandbox names its isolation with
:func:`rlvr.sandbox.isolation_mode`; record it once per run.
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
from rlvr.sandbox.timeout import VerifierTimeout, time_limit

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
