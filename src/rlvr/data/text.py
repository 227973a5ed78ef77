r"""Normalised prompt text: the tokens deduplication and decontamination compare.

:func:`tokens` turns a prompt into a list of word tokens, so that two prompts that differ
only in layout compare equal:

1. Unicode NFKC (full-width digits, ligatures and non-breaking spaces become their plain
   forms), then lower case (Unicode case folding: ``ß`` and ``SS`` both become ``ss``);
   invisible format characters (zero-width space, soft hyphen, byte order mark, ...: Unicode
   category Cf) are removed;
2. LaTeX spacing and sizing is removed: ``\,`` ``\;`` ``\:`` ``\!`` ``\quad`` ``\qquad``
   ``~`` ``\left`` ``\right``, a backslash before whitespace (``\ ``, the control space), and
   the math delimiters ``$`` ``\(`` ``\)`` ``\[`` ``\]``; an escaped character is read as
   itself (``\%`` as ``%``, ``\{`` as ``{``, ``\$`` removed as ``$`` is);
3. the text is split into tokens: numbers (``12``, ``3.5``), runs of letters, each Han or
   kana character (Chinese and Japanese put no spaces between words), LaTeX command names
   (``\frac``) and the line break ``\\``, and each remaining symbol (``+``, ``^``, ``=``,
   ``(``); whitespace, the punctuation ``. , ; : ? ! ' "`` (and ``‘ ’ “ ” 。 、``) and braces
   ``{ }`` separate tokens and are not tokens themselves.

So ``"Find $x^2 + 1$."``, ``"find x^2+1"`` and ``"FIND  $x ^{2}+1$ ."`` all give
``["find", "x", "^", "2", "+", "1"]``. A chat prompt's text is its user messages' contents,
joined by new lines (the system message is an instruction, not the problem).
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from typing import Any

_LATEX_NOISE = re.compile(
    r"(?P<keep>\\\\)|\\(?P<escaped>[%&#_{}])"
    r"|\\(?:quad|qquad|left|right)(?![a-z])|\\[\s,;:!()\[\]$]|[~$]"
)
r"""LaTeX spacing, sizing and math delimiters, and the backslash of an escaped character
(``\%`` is ``%``; ``\$`` goes with every ``$``); a line break ``\\`` is matched (and kept)
first, so that its second backslash is never read as a control space ``\ `` or a ``\,``."""
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
"""Kana and Han characters: scripts without spaces between words, one token per character."""
_TOKEN = re.compile(
    rf"\d+(?:\.\d+)?|[{_CJK}]|[^\W\d_{_CJK}]+|\\\\|\\[a-z]+|[^\s.,;:?!'\"‘’“”{{}}\w。、]|_"
)


def tokens(text: str) -> list[str]:
    r"""The normalised word tokens of ``text`` (see the module docstring).

    >>> tokens(r"Find $\frac{1}{2} + x^{2}$, please.")
    ['find', '\\frac', '1', '2', '+', 'x', '^', '2', 'please']
    >>> tokens("What is 3.5\\,kg?") == tokens("what is 3.5 KG")
    True
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    if not text.isascii():  # every invisible character is outside ASCII
        text = _invisible().sub("", text)
    return _TOKEN.findall(_LATEX_NOISE.sub(_strip_noise, text))


@functools.cache
def _invisible() -> re.Pattern[str]:
    """The invisible format characters (Unicode category Cf: zero-width space and joiners, soft
    hyphen, byte order mark, direction marks), removed before tokenising: they show as
    nothing, so a copy carrying them differs from the original only in layout. The class is
    written as ranges (a class of each character one by one made tokenising 3x slower)."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)) != "Cf":
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    spans = (re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in ranges)
    return re.compile(f"[{''.join(spans)}]+")


def _strip_noise(found: re.Match[str]) -> str:
    """A space for LaTeX noise; a line break ``\\\\`` as it is; an escaped character as the
    character."""
    return found["keep"] or found["escaped"] or " "


def normalized(text: str) -> str:
    """The tokens of ``text`` joined by single spaces: the key exact deduplication compares.

    >>> normalized("  Solve  x+1=2. ") == normalized("solve x + 1 = 2")
    True
    """
    return " ".join(tokens(text))


def prompt_text(prompt: Any) -> str:
    """The text of a prompt: a string as it is, chat messages as their user contents (all
    contents when no message is the user's), joined by new lines.

    >>> prompt_text([{"role": "system", "content": "Be brief."},
    ...              {"role": "user", "content": [{"type": "text", "text": "2+2?"}]}])
    '2+2?'
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        users = [_content_text(m.get("content")) for m in prompt if m.get("role") == "user"]
        return "\n".join(users or [_content_text(m.get("content")) for m in prompt])
    raise ValueError(f"a prompt must be a string or a list of chat messages, got {prompt!r:.80}")


def _content_text(content: Any) -> str:
    """A message's text: a string as it is, a list of content parts (``{"type": "text",
    "text": ...}``, as OpenAI-style and multimodal chats write them) as its text parts joined
    by new lines, no content (``None``) as ``""``."""
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "\n".join(
            str(part.get("text", "")) for part in content if part.get("type") == "text"
        )
    return str(content)
