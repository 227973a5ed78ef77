r"""Finding the final answer in a completion.

The first rule that matches wins, and within a rule the *last* match: ``\boxed{...}`` (or
``\fbox``, braces matched), ``<answer>...</answer>`` tags, then a final-answer phrase (``The
answer is ...``, ``final answer: ...``, a line starting ``Answer:``). Text inside
``<think>...</think>`` is never searched, nor anything after a ``<think>`` left open.
``extract="flexible"`` takes the last number instead (lm-evaluation-harness's GSM8K
"flexible-extract").
"""

from __future__ import annotations

import re
from collections.abc import Callable

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_TAG_RE = re.compile(r"<(/?)answer>", re.IGNORECASE)
# "\s*(?::\s*)?" rather than "\s*:?\s*": two adjacent \s* backtrack quadratically on a run of
# newlines ("The answer is" and 40,000 newlines took 13 s).
_PHRASE_RE = re.compile(
    r"(?:final answer|the answer)\s*(?:is|:)\s*(?::\s*)?(?P<a>[^\n]+)"
    r"|^[ \t*#>]*answer[ \t*]*:[ \t*]*(?P<b>[^\n]+)",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCE_END_RE = re.compile(r"\.\s")
_NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
EXTRACTIONS = ("strict", "flexible")
"""``strict``: :func:`extract_answer`'s rules; ``flexible``: :func:`last_number`."""
_DELIMITERS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_MAX_NESTED_PHRASES = 16


def after_think(text: str) -> str:
    r"""The part of ``text`` after the last ``</think>``: all of it if there is none, nothing if
    a ``<think>`` is left open (the reasoning did not end, so it holds no final answer).

    >>> after_think("<think>2+2 is 4</think> \\boxed{4}")
    ' \\boxed{4}'
    >>> after_think("<think>maybe \\boxed{4}? or 5, let me")
    ''
    """
    _, close, after = text.rpartition(THINK_CLOSE)
    return "" if THINK_OPEN in (after if close else text) else after


def _closing_braces(text: str) -> dict[int, int]:
    """Index of each ``{`` whose group closes -> index of its ``}`` (one linear pass)."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    for i, char in enumerate(text):
        if char == "{":
            stack.append(i)
        elif char == "}" and stack:
            closes[stack.pop()] = i
    return closes


def _boxes(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the contents of every complete ``\\boxed{...}``, in order."""
    closes = _closing_braces(text)
    opens = (match.end() - 1 for match in _BOX_RE.finditer(text))
    return [(at + 1, closes[at]) for at in opens if at in closes]


def last_boxed(text: str) -> str | None:
    r"""Contents of the last complete ``\boxed{...}`` in ``text``.

    >>> last_boxed(r"so \boxed{1} then \boxed{\frac{3}{4}}.")
    '\\frac{3}{4}'
    >>> last_boxed(r"\boxed{\{1, \{2\}\}}")
    '\\{1, \\{2\\}\\}'
    >>> last_boxed(r"\boxed{unclosed") is None
    True
    """
    spans = _boxes(text)
    return text[spans[-1][0] : spans[-1][1]] if spans else None


def boxed_answers(text: str) -> list[str]:
    r"""Contents of every complete ``\boxed{...}`` not nested in another one, in order.

    >>> boxed_answers(r"maybe \boxed{2}, or \boxed{\boxed{3}}? \boxed{4")
    ['2', '\\boxed{3}']
    """
    found, outer_end = [], -1
    for start, end in _boxes(text):
        if start > outer_end:
            found.append(text[start:end])
            outer_end = end
    return found


def answer_tags(text: str) -> list[str]:
    """Contents of every ``<answer>...</answer>`` in ``text``, in order, in one linear pass.

    Each ``<answer>`` runs to the first ``</answer>`` after it (as the lazy regex
    ``<answer>(.*?)</answer>`` would match, without its rescan of the rest of the text for
    every unclosed tag: 10,000 of them took 5 s).

    >>> answer_tags("</answer><ANSWER> 1 </Answer> <answer><answer>2</answer> <answer>3")
    [' 1 ', '<answer>2']
    """
    found: list[str] = []
    start: int | None = None
    for tag in _ANSWER_TAG_RE.finditer(text):
        closing = bool(tag.group(1))
        if start is None and not closing:
            start = tag.end()
        elif start is not None and closing:
            found.append(text[start : tag.start()])
            start = None
    return found


def _clean(answer: str) -> str:
    """Strip the prose around an answer: a trailing sentence, ``$``/``\\(`` delimiters, ``**``."""
    answer = _SENTENCE_END_RE.split(answer, maxsplit=1)[0]
    answer = answer.strip().strip("*").strip().rstrip(".").strip()
    for left, right in _DELIMITERS:
        inner = answer[len(left) : len(answer) - len(right)]
        if inner and answer.startswith(left) and answer.endswith(right):
            answer = inner.strip()
    return answer


def _last_phrase(text: str) -> str | None:
    """The answer after the last final-answer phrase ("Final Answer: The final answer is 5")."""
    answer = None
    for _ in range(_MAX_NESTED_PHRASES):  # a bound: each round rescans the line
        matches = list(_PHRASE_RE.finditer(text))
        if not matches:
            return answer
        last = matches[-1]
        text = last.group("a") or last.group("b")
        answer = _clean(text)
    return answer


def final_answers(text: str) -> list[str]:
    r"""Every final answer ``text`` states under the first rule that finds one, in order.

    Several different entries mean the completion hedges between answers; one entry (or the
    same one repeated) is a single final answer. Boxed answers nested in another box count as
    part of it; the answer-phrase rule gives at most one.

    >>> final_answers(r"\boxed{3} or maybe \boxed{4}")
    ['3', '4']
    >>> final_answers("<answer>7</answer> and again <answer> 7 </answer>")
    ['7', '7']
    >>> final_answers("The answer is 5.")
    ['5']
    """
    return _answers(text, boxed_answers)


def extract_answer(text: str) -> str | None:
    r"""The final answer written in ``text``, or ``None`` when there is none.

    >>> extract_answer(r"We get $x = 3$, so the answer is $\boxed{\dfrac{3}{4}}$.")
    '\\dfrac{3}{4}'
    >>> extract_answer("Calculate 5 - 3 - 6. The answer is -4.")
    '-4'
    >>> extract_answer("Working...\nAnswer: 1,000")
    '1,000'
    >>> extract_answer("Final Answer: The final answer is $-5$. I hope it is correct.")
    '-5'
    >>> extract_answer("<think>maybe \\boxed{7}</think><answer> 12 </answer>")
    '12'
    >>> extract_answer("I do not know.") is None
    True
    """
    answers = _answers(text, lambda t: [] if (box := last_boxed(t)) is None else [box])
    return answers[-1] if answers else None


def _answers(text: str, boxes: Callable[[str], list[str]]) -> list[str]:
    """The answers after ``</think>`` under the first rule that finds one (``boxes`` first)."""
    text = after_think(text)
    for found in (boxes(text), answer_tags(text)):
        if found:
            return [a.strip() for a in found]
    phrase = _last_phrase(text)
    return [phrase] if phrase else []


def last_number(text: str) -> str | None:
    r"""The last number after ``</think>`` (``-``, digits with optional thousands commas, optional
    decimals; inside other text too), commas removed: lm-evaluation-harness's "flexible-extract".

    >>> last_number("3 + 4 = 7. So the total is 1,250 apples.")
    '1250'
    >>> last_number(r"<think>maybe 5</think> so \\boxed{-2.5}."), last_number("5-3=2")
    ('-2.5', '2')
    >>> last_number("<think>it is 5</think> I am not sure.") is None
    True
    """
    found = _NUMBER_RE.findall(after_think(text))
    return found[-1].replace(",", "") if found else None


def check_extract(extract: str) -> None:
    """Raise ``ValueError`` unless ``extract`` names a rule of :data:`EXTRACTIONS`."""
    if extract not in EXTRACTIONS:
        raise ValueError(f"extract must be one of {list(EXTRACTIONS)}, got {extract!r}")


def extract_with(text: str, extract: str = "strict") -> str | None:
    """The answer in ``text`` under the named rule (``strict`` or ``flexible``)."""
    check_extract(extract)
    return extract_answer(text) if extract == "strict" else last_number(text)
