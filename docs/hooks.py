"""MkDocs hook (mkdocs.yml `hooks:`): the site is built from docs/, and the repository's own
relative links work in it, unchanged.

README.md (the site's home page), ARCHITECTURE.md, BENCHMARKS.md and screenshots/ stay at the top
of the repository, where GitHub and a clone show them. A copy in docs/ would be a second copy to
keep in step, and a symlink is refused by CI (.ci/run), so this hook adds them to the site from
where they are, under the same names, and rewrites each relative link of every page from its path
in the repository (`../screenshots/main.svg` in docs/monitor.md, `docs/monitor.md` in README.md)
to the same file's place in the site. A link to anything else outside docs/ is left as it is, and
`mkdocs build --strict` fails on it. Not part of the site itself (mkdocs.yml `exclude_docs`).

Two differences from GitHub are bridged the same way. GitHub starts a list on the line after a
paragraph's, Python-Markdown only after a blank line (BENCHMARKS.md's history is written the
GitHub way), so a blank line is added there in what MkDocs reads. In a table, GitHub wants
a pipe inside `code` escaped (`a \\| b`) where Python-Markdown shows the backslash, so it goes.
The files stay as they are.
"""
from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Files and folders at the top of the repository that the site shows, under the same names.
FROM_ROOT = ("README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "screenshots")

# [text](target) and ![alt](target): the target up to its closing parenthesis, no spaces in it
_LINK = re.compile(r"(\]\()([^()\s]+)(\))")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^ {0,3}([-*+]|\d+\.) ")
_CODE = re.compile(r"(`+)(.+?)\1")


def on_files(files: Files, config: Any) -> Files:
    for name in FROM_ROOT:
        path = ROOT / name
        found = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for each in found:
            files.append(File(each.relative_to(ROOT).as_posix(), str(ROOT), config["site_dir"],
                              config["use_directory_urls"]))
    return files


def site_path(target: Path) -> str | None:
    """Where a file of the repository is in the site (its path under docs/, or its own name for
    the files taken from the top), or None if the site does not hold it."""
    try:
        return target.relative_to(DOCS).as_posix()
    except ValueError:
        pass
    try:
        inside = target.relative_to(ROOT)
    except ValueError:
        return None
    return inside.as_posix() if inside.parts and inside.parts[0] in FROM_ROOT else None


def rewrite(markdown: str, source: Path, src_uri: str) -> str:
    """Every relative link of a page whose source is `source` (its path in the repository),
    made relative to `src_uri` (its path in the site), outside fenced code; and a blank line
    before a list that follows a paragraph's line."""
    here = posixpath.dirname(src_uri)

    def one(match: re.Match[str]) -> str:
        target = match.group(2)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("/", "#")):
            return match.group(0)
        path, hash_, anchor = target.partition("#")
        where = site_path(Path(os.path.normpath(source.parent / path)))
        if where is None:
            return match.group(0)
        new = posixpath.relpath(where, here or ".")
        return f"{match.group(1)}{new}{hash_}{anchor}{match.group(3)}"

    out: list[str] = []
    fenced = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            before = out[-1] if out else ""
            if _ITEM.match(line) and before.strip() and not before[0].isspace() and not _ITEM.match(before) \
                    and not before.lstrip().startswith(("|", "#", ">")):
                out.append("")
            line = _LINK.sub(one, line)
            if line.lstrip().startswith("|"):
                line = _CODE.sub(lambda m: m.group(0).replace("\\|", "|"), line)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Page, config: Any, files: Files) -> str:
    return rewrite(markdown, Path(page.file.abs_src_path or ""), page.file.src_uri)
