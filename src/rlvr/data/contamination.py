"""Decontamination: drop training prompts that share an n-gram with an evaluation set.

Klear-Reasoner (klear-reasoner-gppo.txt sec. 3.1, 3.2.1, 4.1) removes every training prompt with
a **9-gram** overlap with the evaluation problems. Here both sides are tokenised by
:func:`rlvr.data.text.tokens` (case, whitespace, LaTeX spacing and punctuation ignored);
a prompt is contaminated when some ``n`` consecutive tokens of it are also ``n``
consecutive tokens of one evaluation problem. Prompts or problems with fewer than ``n``
tokens have no n-gram and never match.

:class:`NgramIndex` keeps one 64-bit hash per evaluation n-gram (a dict from hash to where
the n-gram is); a hit is confirmed against the problem's own tokens, so a hash collision
never drops a prompt. A prompt's windows that hold a token no evaluation problem has are
skipped without hashing.

A set whose problems share an instruction of ``n`` tokens or more (reasoning-gym's "State
the final answer to the following arithmetic problem:" is 9 tokens) contaminates every
prompt that carries the same instruction. ``common=K`` cuts the n-grams found in ``K`` or
more evaluation problems out of both sides before they are compared, so only the problems'
own text is: n-grams are formed within the pieces left between cuts, never across one;
identical problems (equal tokens: one problem in two sets, or a set named twice) count once
(Klear's rule is ``common=0``: nothing cut; its sets are natural-language problems).

An evaluation SET is named as ``rlvr eval --data`` names it: a named dataset (``math500``,
``aime2024``, ...: read from the Hub or its local cache), a ``.jsonl`` / ``.parquet`` file, a
hub name or dataset directory (its ``split``, ``test`` by default), optionally with
``::FIELDS`` (a field mapping or a prompt field); or a generated held-out set, ``reasoning_gym:<task>`` / ``code_tasks:<family>``, as
``rlvr train`` generates it with the default ``data.gym`` (200 problems, seed 1,000,000).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.data.fields import DATASETS
from rlvr.data.loading import Row, looks_like_path, read_hf
from rlvr.data.rowfiles import (
    StepReport,
    check_step_output,
    prompt_field,
    read_rows,
    row_prompts,
    write_step,
)
from rlvr.data.text import tokens

GYM_EVAL_SIZE = 200
"""Problems in a generated held-out set (``data.gym.eval_size``'s default)."""
GYM_EVAL_SEED = 1_000_000
"""Seed of a generated held-out set (``data.gym``'s default held-out seed)."""


@dataclass(frozen=True)
class Match:
    """The first n-gram a prompt shares with an evaluation problem."""

    ngram: str
    """The shared tokens, joined by spaces."""
    set: str
    """The evaluation set, as it was named."""
    where: str
    """The problem in it (file and line, or row number)."""


class NgramIndex:
    """Hashed n-grams of evaluation problems; :meth:`match` finds a prompt's first shared one.

    ``common=K`` (> 0) cuts every n-gram found in ``K`` or more problems out of the problems
    and the prompts before they are compared (a shared instruction), so only their own
    text is compared; no n-gram spans a cut.
    """

    def __init__(self, n: int = 9, common: int = 0) -> None:
        if n < 1:
            raise ValueError(f"ngram must be >= 1, got {n}")
        if common < 0:
            raise ValueError(f"common must be >= 0, got {common}")
        if common == 1:  # every n-gram of a problem is in one problem: all would be cut
            raise ValueError(
                "common=1 cuts every n-gram an evaluation problem has, so no prompt could "
                "match; use 0 (cut nothing) or K >= 2 (a passage K problems share)"
            )
        self.n, self.common = n, common
        self._problems: list[tuple[str, str, list[str]]] = []  # (set, where, tokens)
        self._own: list[list[list[str]]] = []  # each problem's pieces between common n-grams
        self._grams: dict[int, tuple[int, int, int]] | None = None  # hash -> (problem, piece, i)
        self._counts: dict[int, int] = {}  # hash -> distinct problems holding it (common > 0)
        self._counted: set[tuple[str, ...]] = set()  # the problems counted in _counts
        self._vocab: set[str] = set()

    def __len__(self) -> int:
        """Distinct n-grams indexed."""
        return len(self._index())

    def add(self, set_name: str, where: str, text: str) -> None:
        """Add one evaluation problem. For ``common``, a problem whose tokens equal an earlier
        one's (the same problem in two sets) is not counted again: its own text is not a
        passage shared by several problems."""
        toks = tokens(text)
        self._problems.append((set_name, where, toks))
        self._vocab.update(toks)
        self._grams = None
        if self.common and tuple(toks) not in self._counted:
            self._counted.add(tuple(toks))
            for key in {hash(tuple(toks[i : i + self.n])) for i in range(len(toks) - self.n + 1)}:
                self._counts[key] = self._counts.get(key, 0) + 1

    def own(self, toks: list[str]) -> list[list[str]]:
        """The pieces of ``toks`` left between the n-grams common to ``common`` or more
        problems (all of ``toks`` as one piece when nothing is cut); n-grams are formed
        within a piece, never across a cut."""
        if not self.common:
            return [toks]
        covered = [False] * len(toks)
        for i in range(len(toks) - self.n + 1):
            if self._counts.get(hash(tuple(toks[i : i + self.n])), 0) >= self.common:
                covered[i : i + self.n] = [True] * self.n
        pieces: list[list[str]] = [[]]
        for tok, cut in zip(toks, covered, strict=True):
            if not cut:
                pieces[-1].append(tok)
            elif pieces[-1]:
                pieces.append([])
        return [piece for piece in pieces if piece]

    def _index(self) -> dict[int, tuple[int, int, int]]:
        """Hash of each n-gram of the problems' own pieces -> its first (problem, piece,
        position)."""
        if self._grams is None:
            self._own = [self.own(toks) for _, _, toks in self._problems]
            self._grams = {}
            for problem, pieces in enumerate(self._own):
                for piece, toks in enumerate(pieces):
                    for i in range(len(toks) - self.n + 1):
                        key = hash(tuple(toks[i : i + self.n]))
                        self._grams.setdefault(key, (problem, piece, i))
        return self._grams

    def match(self, text: str) -> Match | None:
        """The first n-gram of ``text`` found in an indexed problem, else ``None``."""
        for piece in self.own(tokens(text)):
            hit = self._match_piece(piece)
            if hit is not None:
                return hit
        return None

    def _match_piece(self, toks: list[str]) -> Match | None:
        """The first n-gram of one piece of a prompt found in an indexed problem."""
        grams, n, known, start = self._index(), self.n, self._vocab, 0
        for i, tok in enumerate(toks):
            if tok not in known:
                start = i + 1
            elif i + 1 - start >= n:
                gram = tuple(toks[i + 1 - n : i + 1])
                hit = grams.get(hash(gram))
                if hit is None:
                    continue
                problem, piece, at = hit
                if tuple(self._own[problem][piece][at : at + n]) == gram:
                    set_name, where, _ = self._problems[problem]
                    return Match(" ".join(gram), set_name, where)
        return None


def eval_set_rows(spec: str, split: str = "test") -> tuple[list[Row], str]:
    """``(rows, prompt field)`` of an evaluation SET (see the module docstring); ``split``: the
    split read from a dataset directory or hub name (a named set reads its own)."""
    source, _, fields = spec.partition("::")
    kind, colon, task = source.partition(":")
    if colon and kind in ("reasoning_gym", "code_tasks") and not Path(source).exists():
        return _generated(kind, task), "question"
    if source in DATASETS:
        named = DATASETS[source]
        rows = list(read_hf(named.hub, split=named.split, configs=named.configs))
        return rows, prompt_field(rows, fields or named.fields)
    path = Path(source).expanduser()
    if path.is_dir():
        rows = list(read_hf(str(path), split=split))
    elif looks_like_path(source) or path.is_file():
        rows = read_rows(source)
    else:
        rows = list(read_hf(source, split=split))
    if not rows:
        raise ValueError(f"{spec}: no rows")
    return rows, prompt_field(rows, fields or None, hint=f"{source}::FIELD")


def _generated(kind: str, task: str) -> list[Row]:
    if kind == "code_tasks":
        from rlvr.data.code_tasks import code_task_rows

        made = code_task_rows(task, size=GYM_EVAL_SIZE, seed=GYM_EVAL_SEED)
    else:
        from rlvr.data.gym import gym_rows

        made = gym_rows(task, size=GYM_EVAL_SIZE, seed=GYM_EVAL_SEED)
    return [(f"{kind}:{task} #{i}", row) for i, row in enumerate(made)]


def build_index(
    sets: Sequence[str], n: int = 9, common: int = 0, split: str = "test"
) -> NgramIndex:
    """An :class:`NgramIndex` over every problem of the named evaluation sets (``split``: see
    :func:`eval_set_rows`)."""
    if not sets:
        raise ValueError("no evaluation set to decontaminate against")
    index = NgramIndex(n, common)
    for spec in sets:
        rows, field = eval_set_rows(spec, split)
        for (where, _), text in zip(rows, row_prompts(rows, field), strict=True):
            index.add(spec, where, text)
    return index


def decontaminate_rows(
    rows: list[Row], prompts: list[str], index: NgramIndex
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(kept rows, dropped)``; each dropped item is ``{"reason": "contaminated", "ngram",
    "set", "set_where", "where", "row"}``."""
    kept, dropped = [], []
    for (where, row), prompt in zip(rows, prompts, strict=True):
        hit = index.match(prompt)
        if hit is None:
            kept.append(row)
        else:
            dropped.append(
                {
                    "reason": "contaminated",
                    "ngram": hit.ngram,
                    "set": hit.set,
                    "set_where": hit.where,
                    "where": where,
                    "row": row,
                }
            )
    return kept, dropped


def decontaminate_file(
    source: str | Path,
    output: str | Path,
    against: Sequence[str],
    *,
    n: int = 9,
    common: int = 0,
    field: str | None = None,
    split: str = "test",
) -> StepReport:
    """Drop the rows of ``source`` sharing an ``n``-gram with a set in ``against``; the kept
    rows go to ``output``, the dropped ones (with the n-gram and set) to ``<stem>.dropped.jsonl``;
    n-grams found in ``common`` or more evaluation problems are ignored (0: none are);
    ``split``: the split of the sets that are dataset directories or hub names."""
    check_step_output(output, [source, *(spec.partition("::")[0] for spec in against)])
    index = build_index(against, n, common, split)
    rows = read_rows(source)
    kept, dropped = decontaminate_rows(rows, row_prompts(rows, prompt_field(rows, field)), index)
    return write_step(kept, dropped, output)
