"""The README is a front door to docs/: every relative link in it, in the changelog and in
docs/ (decisions included) must lead somewhere, file and heading alike, as GitHub renders
them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS, *sorted((ROOT / "docs").glob("*/*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation other than `-` and `_` dropped,
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / path_part).resolve() if path_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no such heading")
    assert broken == []


def test_the_readme_reaches_every_doc_in_one_click() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")
    }
    assert {*DOCS, ROOT / "CHANGELOG.md", ROOT / "docs" / "decisions" / "README.md"} <= linked


def test_the_readme_stays_a_front_door() -> None:
    assert len((ROOT / "README.md").read_bytes()) <= 12_000
