"""Every relative link and image in README.md, CHANGELOG.md, ALGORITHMS.md and docs/ points at
a file or folder of the checkout, and every table there ends before the text under it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "ALGORITHMS.md", *ROOT.glob("docs/**/*.md")]
)
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
"""A Markdown link or image: ``[text](target)`` / ``![alt](target)``."""


def _targets(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    found = (m.group(1) for m in LINK.finditer(text))
    return [t for t in found if not re.match(r"[a-z]+:|#", t)]  # not http:, mailto:, #anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in _targets(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_the_link_pattern_finds_links_and_images():
    assert LINK.findall("see [a](docs/x.md#y) and ![f](figures/f.png), not [b] (c)") == [
        "docs/x.md#y",
        "figures/f.png",
    ]


def _rows_run_into_text(page: Path) -> list[str]:
    """Lines of text right under a table's last row: GitHub renders each as one more row."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    lines = text.splitlines()
    return [
        below
        for row, below in zip(lines, lines[1:], strict=False)
        if row.startswith("|") and below.strip() and not below.startswith("|")
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_blank_line_ends_every_table(page):
    """docs/objectives.md's table of papers ran into the paragraph under it."""
    joined = _rows_run_into_text(page)
    assert not joined, f"{page.relative_to(ROOT)}: text right under a table: {joined}"


def test_the_readme_links_every_page_of_docs():
    """docs/data.md (`rlvr data`) was missing from the README's list of documentation."""
    linked = set(_targets(ROOT / "README.md"))
    pages = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))
    assert [p for p in pages if not any(t.split("#")[0] == p for t in linked)] == []
