r"""The ``math`` verifier: final-answer extraction and equivalence through ``math-verify``.

The answer is found with :func:`rlvr.rewards.extract.extract_answer` (``\boxed{}``,
``<answer>`` tags, "The answer is ..." / "Answer: ..." lines); a completion without one
scores ``wrong``. The extracted answer and the reference are parsed by ``math-verify``
(LaTeX and plain expressions: fractions, ``\dfrac``, decimals, intervals, sets, units,
percentages, degrees) and compared symbolically and numerically.

``math-verify``'s own time limits use ``signal.alarm``, which raises off the main thread;
they are switched off here. Limit a call with :func:`rlvr.rewards.timeout.time_limit` or,
better, score batches with :class:`rlvr.rewards.scoring.Scorer`, which enforces a time
limit per completion on any thread and kills worker processes that overrun.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from rlvr.rewards.extract import extract_answer, extract_with
from rlvr.rewards.registry import register

# Thousands separators written with LaTeX spaces ("10\,000", "10\ 000") -> "10000".
_THIN_SPACE_RE = re.compile(r"(?<=\d)\\[,;: ](?=\d{3}(?!\d))")
_EXTRACTION = (LatexExtractionConfig(), ExprExtractionConfig())


class _NoTimeoutWarning(logging.Filter):
    """Drop math-verify's one-off warning that its signal-based timeout is disabled."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_NoTimeoutWarning())


def _normalize(answer: str) -> str:
    """Text-level fixes math-verify does not make itself."""
    answer = answer.strip().strip("$").strip()
    return _THIN_SPACE_RE.sub("", answer)


def parse_answer(answer: str) -> list:
    r"""Parse one answer string (no surrounding prose) into math-verify's representation.

    >>> parse_answer(r"\dfrac{3}{4}")[0]
    3/4
    """
    return parse(
        "\\boxed{" + _normalize(answer) + "}",
        extraction_config=_EXTRACTION,
        parsing_timeout=None,
    )


def parse_reference(reference: Any) -> list:
    """Parse a gold answer: a number, a string (may contain ``\\boxed{}``), or an entry dict.

    An entry dict (a reasoning-gym row) contributes its ``answer`` key.
    """
    if isinstance(reference, dict) and "answer" in reference:
        reference = reference["answer"]
    text = str(reference)
    if "\\boxed" in text or "\\fbox" in text:
        text = extract_answer(text) or text
    return parse_answer(text)


def answers_match(predicted: str, reference: Any) -> bool:
    r"""True when ``predicted`` (an extracted answer) equals ``reference`` mathematically.

    >>> answers_match("0.75", r"\frac{3}{4}"), answers_match("(0,1]", "(0, 1)")
    (True, False)
    """
    gold = parse_reference(reference)
    guess = parse_answer(predicted)
    if not gold or not guess:
        return False
    return bool(verify(gold, guess, timeout_seconds=None))


@register("math")
def math_verifier(
    completion: str,
    reference: Any,
    *,
    correct: float = 1.0,
    wrong: float = 0.0,
    extract: str = "strict",
) -> float:
    r"""``correct`` if the completion's final answer equals ``reference``, else ``wrong``.

    ``extract="flexible"`` takes the last number in the completion as its answer
    (:func:`rlvr.rewards.extract.last_number`) instead of the strict rules.

    >>> math_verifier(r"Half of 3/2 is \boxed{\dfrac{3}{4}}.", "0.75")
    1.0
    >>> math_verifier("The answer is 10,000.", r"10^4", wrong=-1.0)
    1.0
    >>> math_verifier("The answer is 7.", "8", wrong=-1.0)
    -1.0
    >>> math_verifier("8 is what I would guess without committing.", "8")
    0.0
    >>> math_verifier("8 is what I would guess, or 8.0", "8", extract="flexible")
    1.0
    """
    answer = extract_with(completion, extract)
    if answer is None or not answer:
        return wrong
    return correct if answers_match(answer, reference) else wrong
