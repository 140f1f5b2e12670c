"""Curated ignore sets, shipped as package data (core/steering/sets/NAME.txt), as grab-site
ships its own: `global` (on by default), `mediawiki`, `forums`, `blogs` (calendars and
date archives) and `social` (share links, tracking). Each file is a short list of RE2
patterns, each under a comment saying what it stops; the file's first comment line
describes the set.

Repeated path segments (`/css/css/css/`, `/a/b/a/b/`) need a backreference, which RE2
refuses; `repeated_segments` checks them in code, beside the queue view's trap detector
(core/monitor/queueview.py), and is reported as the `global` set's pattern `REPEATS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import PatternError
from ..queueing.patterns import check

SETS_DIR = Path(__file__).with_name("sets")
NAMES = ("global", "mediawiki", "forums", "blogs", "social")
DEFAULT = ("global",)
REPEATS = "(repeated path segments)"  # the global set's check in code, shown as a pattern


@dataclass(frozen=True, slots=True)
class SetPattern:
    pattern: str
    why: str  # the comment above it: the trap it stops


@dataclass(frozen=True, slots=True)
class IgnoreSet:
    name: str
    description: str
    patterns: tuple[SetPattern, ...]
    repeats: bool = False  # also stops repeated path segments (global)


def unknown(names: tuple[str, ...] | list[str]) -> list[str]:
    return [n for n in names if n not in NAMES]


@cache
def load(name: str) -> IgnoreSet:
    """The set called `name` (ValueError if there is none); every pattern checked for RE2."""
    if name not in NAMES:
        raise ValueError(f"no ignore set {name!r}: the sets are {', '.join(NAMES)}")
    text = (SETS_DIR / f"{name}.txt").read_text(encoding="utf-8")
    description, why, out = "", "", []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            why = ""
            continue
        if line.startswith("#"):
            comment = line.lstrip("#").strip()
            if not description:
                description = comment.split(":", 1)[-1].strip()
            else:
                why = comment
            continue
        try:
            check(line)
        except PatternError as exc:  # a bad shipped pattern is our bug: say which
            raise ValueError(f"ignore set {name}: {exc}") from None
        out.append(SetPattern(line, why))
    return IgnoreSet(name, description, tuple(out), repeats=name == "global")


MAX_SEGMENTS = 64  # more path segments than this is a trap (no real site nests that deep)


def repeated_segments(url: str) -> bool:
    """The path repeats itself: one segment three times in a row (`/css/css/css/`), or a run
    of two or more segments twice in a row (`/a/b/a/b/`). Linear in practice: the
    quadratic part runs only on paths that repeat a segment at all."""
    start = url.find("://")
    slash = url.find("/", start + 3 if start >= 0 else 0)
    if slash < 0:
        return False
    end = len(url)
    for stop in ("?", "#"):
        i = url.find(stop, slash)
        if 0 <= i < end:
            end = i
    segs = [s for s in url[slash:end].split("/") if s]
    n = len(segs)
    if n > MAX_SEGMENTS:  # a hostile page's endless path: a trap by itself, and never a slow check
        return True
    if n < 3 or len(set(segs)) == n:
        return False
    for i in range(n - 2):  # one segment, three times
        if segs[i] == segs[i + 1] == segs[i + 2]:
            return True
    for size in range(2, n // 2 + 1):  # a run, twice: only where the run's first segment comes back
        for i in range(n - 2 * size + 1):
            if segs[i] == segs[i + size] and segs[i:i + size] == segs[i + size:i + 2 * size]:
                return True
    return False
