"""The shell commands of README.md and docs/**/*.md, read out of their code blocks.

A block fenced as ``bash``, ``sh`` or ``shell`` holds commands, one a line (a trailing ``\\``
continues one); ``#`` starts a comment; ``VAR=value`` words before the program set its
environment. In a ``console`` block only the lines after a ``$ `` prompt are commands (the
rest is their output). A block of any other kind holds no command: one whose line starts
with a program below is reported, so a command is never left out by its fence.

A command that cannot run where the tests run says so in its comment, where the reader sees
it too (the tests then only check that it parses, see ``test_docs_commands.py``):

- ``needs a GPU``: a CUDA device (``model.device=cuda``, ``--vllm``, verl's trainer);
- ``needs the hub``: a model or data set downloaded from the Hugging Face Hub;
- ``long run``: a benchmark or study (minutes to hours).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL_FENCES = ("bash", "sh", "shell")
MARKERS = {"needs a GPU": "gpu", "needs the hub": "hub", "long run": "long"}
"""Comment phrase -> marker name."""
PROGRAMS = ("rlvr", "python", "python3", "make", "pip", "torchrun", "accelerate", "bash")
"""Programs a documented command starts with (also ``.venv*/bin/<program>``)."""
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VENV_BIN = re.compile(r"^\.venv[^/]*/bin/")
_FENCE = re.compile(r"^\s*```(\S*)")


@dataclass(frozen=True)
class Command:
    """One documented command."""

    where: str
    """``file:line`` of its first line."""
    text: str
    """The command as written (continuations joined, comment dropped)."""
    env: dict[str, str]
    """``VAR=value`` words before the program."""
    argv: list[str]
    """Program and arguments."""
    markers: frozenset[str]
    """``gpu``, ``hub``, ``long``: what keeps it from running here."""


def doc_files() -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_blocks(path: Path) -> list[tuple[str, int, list[str]]]:
    """``(fence info, line of the first body line, body lines)`` of each fenced block."""
    blocks, current = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = _FENCE.match(line)
        if match and current is None:
            current = (match.group(1), number + 1, [])
        elif match:
            blocks.append(current)
            current = None
        elif current is not None:
            current[2].append(line)
    return blocks


def split_comment(line: str) -> tuple[str, str]:
    """``(code, comment)``: the comment starts at the first ``#`` after a blank outside quotes."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _logical_lines(body: list[str], first: int, console: bool):
    """``(line number, code, comment)`` of each command, continuations joined."""
    pending, start, comments = "", 0, []
    for offset, raw in enumerate(body):
        line = raw.strip()
        if not pending:
            if console and not line.startswith("$ "):
                continue
            line = line[2:] if console else line
            start, comments = first + offset, []
        code, comment = split_comment(line)
        comments.append(comment)
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        text = (pending + code).strip()
        pending = ""
        if text:
            yield start, text, " ".join(comments)


def parse_command(where: str, text: str, comment: str) -> Command:
    """The command's environment words, argv and markers."""
    words = shlex.split(text)
    env = {}
    while words and _ENV_WORD.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    markers = frozenset(name for phrase, name in MARKERS.items() if phrase in comment)
    return Command(where, text, env, words, markers)


def commands(path: Path) -> list[Command]:
    """Every command of the shell and console blocks of ``path``."""
    name = path.relative_to(ROOT).as_posix()
    out = []
    for info, first, body in code_blocks(path):
        if info in SHELL_FENCES or info == "console":
            for number, text, comment in _logical_lines(body, first, info == "console"):
                out.append(parse_command(f"{name}:{number}", text, comment))
    return out


def stray_commands(path: Path) -> list[str]:
    """``file:line`` of command lines in blocks that are not fenced as shell or console."""
    name = path.relative_to(ROOT).as_posix()
    out = []
    for info, first, body in code_blocks(path):
        if info in SHELL_FENCES or info == "console":
            continue
        for offset, line in enumerate(body):
            words = [w for w in line.lstrip("$ ").split() if not _ENV_WORD.match(w)]
            said = len(words) > 1 and words[1].endswith(":")  # output: "rlvr eval: sampling ..."
            if info in ("", "text") and words and program(words[0]) in PROGRAMS and not said:
                out.append(f"{name}:{first + offset}: {line.strip()}")
    return out


def program(word: str) -> str:
    """The program a command's first word runs (``.venv/bin/rlvr`` -> ``rlvr``)."""
    return _VENV_BIN.sub("", word)
