"""README.md stays one screen, and no link of the docs leads nowhere.

README.md is the first screen a newcomer reads: what crawltop is, the two commands, what it does,
links into docs/ and the generated option table (`make reference`). At most README_MAX_LINES
lines, the table included; what does not fit goes on its page in docs/. Every relative link (and
image) of README.md, BENCHMARKS.md, ARCHITECTURE.md and docs/**/*.md must name a file that
exists, and its #anchor a heading of that file, as GitHub makes anchors (mkdocs.yml makes the
site's the same way). `make docs` (mkdocs build --strict) checks the built site; this runs
without mkdocs.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150

PAGES = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "ARCHITECTURE.md",
                *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"(`+).*?\1")
_LINK = re.compile(r"\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code, inline code spans removed."""
    out, fenced = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((number, _CODE.sub("", line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped,
    each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in path.read_text().split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            name, n = base, 0
            while name in found:  # GitHub numbers repeats: name, name-1, name-2
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def relative_links(path: Path) -> list[tuple[int, str]]:
    return [(number, target) for number, line in prose(path.read_text()) for target in _LINK.findall(line)
            if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)]  # http:, mailto: ...


def test_readme_is_one_screen() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES} (its option table included): "
        "move the detail to its page in docs/ and link it")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_its_anchor(page: Path) -> None:
    broken = []
    for number, target in relative_links(page):
        path, _, anchor = target.partition("#")
        if target.startswith("/"):
            broken.append((number, target, "absolute: GitHub and the site resolve it differently"))
            continue
        file = (page.parent / path).resolve() if path else page
        if not file.is_file():
            broken.append((number, target, "no such file" if not file.exists() else "not a file"))
        elif not file.is_relative_to(ROOT):
            broken.append((number, target, "outside the repository"))
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append((number, target, f"no heading makes #{anchor} in {file.relative_to(ROOT)}"))
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def test_every_docs_page_is_in_the_site_nav_and_every_nav_entry_exists() -> None:
    # mkdocs.yml read as text: the nav's entries are `- Title: path.md` (or `- path.md`)
    config = (ROOT / "mkdocs.yml").read_text()
    nav = config[config.index("\nnav:"):]
    entries = set(re.findall(r"^\s*-\s+(?:.*:\s+)?([\w./-]+\.md)\s*$", nav, re.M))
    site_pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    from_root = {"README.md", "ARCHITECTURE.md", "BENCHMARKS.md"}  # brought in by docs/hooks.py
    assert site_pages - entries == set(), "pages of docs/ missing from mkdocs.yml's nav"
    assert entries - site_pages - from_root == set(), "nav entries with no page"


def test_the_slugs_are_github_s() -> None:
    assert slug("Link rot: pages first, checks apart") == "link-rot-pages-first-checks-apart"
    assert slug("Host queues: the hosts panel, `H`, the header") == "host-queues-the-hosts-panel-h-the-header"
    assert slug("Archives (WARC 1.1): `--warc` before and after") == "archives-warc-11---warc-before-and-after"
