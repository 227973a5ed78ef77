"""A report as blocks (headings, paragraphs, tables, figures, code), written as Markdown and
as one self-contained HTML page (figures embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Block:
    """One element of a report."""

    kind: str
    """``h1``, ``h2``, ``h3``, ``p``, ``table``, ``img``, ``code``."""
    content: object
    """Text; for ``table`` rows of cells (the first the header); for ``img`` a PNG's path."""


def _md_table(rows: list[list[str]]) -> str:
    esc = [[str(c).replace("|", "\\|").replace("\n", " ") for c in row] for row in rows]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(esc[0])]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    return "\n".join(lines)


def to_markdown(blocks: list[Block], root: Path) -> str:
    """The blocks as Markdown; figures linked by their path relative to ``root``."""
    out = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + str(b.content))
        elif b.kind == "p":
            out.append(str(b.content))
        elif b.kind == "code":
            out.append(f"```bash\n{b.content}\n```")
        elif b.kind == "table":
            out.append(_md_table(b.content))
        elif b.kind == "img":
            rel = Path(b.content).relative_to(root)
            out.append(f"![{rel.stem}]({rel.as_posix()})")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    text = html.escape(str(text))
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
    "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}th{background:#f3f3f3}"
    "img{max-width:100%}code{background:#f3f3f3;padding:0 3px}pre{background:#f3f3f3;padding:8px}"
)


def to_html(blocks: list[Block], title: str) -> str:
    """The blocks as one HTML page that needs no other file."""
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>"
    ]
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append(f"<{b.kind}>{_inline(b.content)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_inline(b.content)}</p>")
        elif b.kind == "code":
            out.append(f"<pre>{html.escape(str(b.content))}</pre>")
        elif b.kind == "table":
            head, *rows = b.content
            out.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows]
            out.append("</table>")
        elif b.kind == "img":
            data = base64.b64encode(Path(b.content).read_bytes()).decode()
            out.append(
                f"<p><img alt='{html.escape(Path(b.content).stem)}' src='data:image/png;base64,{data}'></p>"
            )
    out.append("</body></html>")
    return "\n".join(out)
