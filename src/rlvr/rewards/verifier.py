"""The :class:`Verifier` object: a registered verifier function bound to its options.

Kept apart from :mod:`rlvr.rewards.registry` so that modules the registry builds on (the
``+format`` wrapper) can use it without importing the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

VerifierFn = Callable[..., float]


@dataclass(frozen=True)
class Verifier:
    """A registered verifier bound to its options; call it like the plain function.

    Picklable (module-level function plus options), so worker processes can run it.
    """

    spec: str
    """The spec it was built from, e.g. ``"math+format"``."""
    fn: VerifierFn
    """The registered function."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Keyword options bound to ``fn``."""
    correct_value: float = 1.0
    """Score of a fully correct completion."""
    failure_value: float = 0.0
    """Score of a wrong completion, and of one whose verification failed or timed out."""
    lowest_value: float | None = None
    """The lowest score it gives when below ``failure_value`` (a ``+format`` penalty)."""

    @property
    def score_range(self) -> tuple[float, float]:
        """The scores it may give, lowest to ``correct_value``."""
        low = self.failure_value if self.lowest_value is None else self.lowest_value
        return min(low, self.failure_value), self.correct_value

    def __call__(self, completion: str, reference: Any) -> float:
        score = self.fn(completion, reference, **self.options)
        if isinstance(score, (str, bytes)):  # float() would read "1" as a score
            raise TypeError(f"a verifier must return a number, got {score!r}")
        return float(score)

    @property
    def votes(self) -> bool:
        """Whether it gives answer keys (maj@k): its function has an ``answer_key`` attribute,
        and so does every verifier among its options (a ``+format`` wrapper's inner one)."""
        inner = [o for o in self.options.values() if isinstance(o, Verifier)]
        return callable(getattr(self.fn, "answer_key", None)) and all(o.votes for o in inner)

    def answer_key(self, completion: str, reference: Any) -> str | None:
        """The completion's vote in maj@k: ``fn.answer_key(completion, reference, **options)``,
        text equal for answers the verifier judges alike, ``None`` for no answer (no vote)."""
        if not self.votes:
            raise ValueError(f"verifier {self.spec!r} gives no answer keys (no maj@k)")
        key = self.fn.answer_key(completion, reference, **self.options)  # type: ignore[attr-defined]
        if key is not None and not isinstance(key, str):
            raise TypeError(f"an answer key must be text or None, got {key!r:.60}")
        return key

    def warm_up(self) -> None:
        """Start what the verifier would start on its first call (the ``math`` verifier's
        helper), outside a completion's time limit: the function's ``warm_up`` attribute, if
        it has one, and that of verifiers among the options (a ``+format`` wrapper's)."""
        hook = getattr(self.fn, "warm_up", None)
        if callable(hook):
            hook()
        for option in self.options.values():
            if isinstance(option, Verifier):
                option.warm_up()
