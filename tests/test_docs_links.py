"""Every relative link and image in README.md, CHANGELOG.md, ALGORITHMS.md and docs/ points at
a file or folder of the checkout."""

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
