"""Every README or docs section our code sends a person to exists (issue #45 item 7: a
warning said "README, 'Quick start'", a section the README does not have).

Read from the source text of the core and the integrations: ``README "Section"``,
``docs/page.md, "Section"`` (quotes of either kind, an optional comma or ``'s``) and
``docs/page.md#anchor`` (GitHub's heading slugs).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "src" / "groundwatch", *sorted((ROOT / "integrations").glob("*/src"))]

_NAMED = re.compile(
    r"(README(?:\.md)?|docs/[\w-]+\.md)(?:,|'s)?\s+\(?[\"'“]([A-Z][^\"'”\n]{2,80})[\"'”]"
)
_ANCHOR = re.compile(r"(README\.md|docs/[\w-]+\.md)#([\w-]+)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)


def _headings(page: str) -> list[str]:
    path = ROOT / (page if page.endswith(".md") else "README.md")
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return _HEADING.findall(text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _references() -> list[tuple[str, str, str, str]]:
    """``(file, page, kind, target)`` for each reference in the source text."""
    found = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            # A reference may wrap across a string's or a docstring's lines.
            text = path.read_text(encoding="utf-8")
            joined = re.sub(r"[\"']\s*\n\s*[\"']", "", text)  # implicit string concatenation
            joined = re.sub(r"\s*\n\s*#?\s*", " ", joined)
            where = str(path.relative_to(ROOT))
            found += [(where, page, "section", name) for page, name in _NAMED.findall(joined)]
            found += [(where, page, "anchor", anchor) for page, anchor in _ANCHOR.findall(joined)]
    return found


def test_the_references_are_read() -> None:
    refs = _references()
    assert ("src/groundwatch/runtime/dataset.py", "docs/feedback.md", "section", "Audits") in refs
    assert any(kind == "anchor" for _, _, kind, _ in refs)


def test_every_section_the_code_names_exists() -> None:
    missing = []
    for where, page, kind, target in _references():
        headings = _headings(page)
        if kind == "anchor":
            ok = target in {_slug(h) for h in headings}
        else:
            ok = any(target.lower() in h.lower() for h in headings)
        if not ok:
            missing.append(f"{where}: {page} {target!r}")
    assert missing == []
