"""Live ignore patterns (grab-site's best-loved feature): regexes on the full URL, added
and deleted while the crawl runs.

A new pattern applies at once: the crawler takes the matching URLs off the queue (each
gets its one Record, error `Ignored: <pattern>`) and later links that match are never
queued. Each pattern counts what it did: queued URLs dropped and later links stopped
(each not-yet-seen link it turned away, counted once per page that linked it).

All patterns are searched in one RE2 set (core/queueing/patterns.py): linear time, one call per
link however many patterns there are. Matching is only asked for links never seen
before, so the per-link cost is paid once per new URL, not per occurrence.

Curated sets (core/steering/ignore_sets.py: `global` on by default, `mediawiki`, ...) are
rules like the others, each with its `source` (the set's name; "" for a live pattern), in
the same RE2 set; the `global` set's repeated-path-segment check runs in code after it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import PatternError
from ..queueing.patterns import PatternSet, check
from .ignore_sets import REPEATS, load, repeated_segments

SETTING = "ignores"  # the key in a --state file's settings


@dataclass(slots=True)
class IgnoreRule:
    pattern: str
    added: float  # wall clock (time.time()), so it means something after a resume
    dropped: int = 0  # queued URLs taken off the queue when the pattern was added
    stopped: int = 0  # later links that matched and were never queued
    source: str = ""  # the ignore set it came from; "" for a pattern added live or by hand

    def to_json(self) -> dict[str, Any]:
        out = {"pattern": self.pattern, "added": self.added, "dropped": self.dropped, "stopped": self.stopped}
        if self.source:
            out["source"] = self.source
        return out

    def reason(self) -> str:
        """What a dropped URL's record says: the pattern, and its set."""
        return f"{self.pattern} (ignore set {self.source})" if self.source else self.pattern


@dataclass(frozen=True, slots=True)
class IgnoreView:
    """One row of the ignores screen (a copy: snapshots never share live objects)."""

    pattern: str
    added: float
    dropped: int
    stopped: int
    source: str = ""  # the ignore set; "" for a live pattern


@dataclass(frozen=True, slots=True)
class IgnoreSetView:
    """One ignore set as `ctl NAME ignore sets` and the ignores screen show it."""

    name: str
    description: str
    on: bool
    patterns: int


@dataclass(frozen=True, slots=True)
class IgnoreResult:
    """What add_ignore did: ok and how many queued URLs it dropped, or the reason it refused."""

    ok: bool
    pattern: str
    error: str | None = None
    dropped: int = 0


class Ignores:
    """The ordered list of rules and their RE2 set; rebuilt on add/remove (rare)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._rules: list[IgnoreRule] = []
        self._regex: list[IgnoreRule] = []  # the rules in the RE2 set, in its order
        self._repeats: IgnoreRule | None = None  # the global set's check in code, when on
        self._set = PatternSet()
        self._clock = clock
        self.on_change: Callable[[list[dict[str, Any]]], None] | None = None  # persistence hook

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, pattern: str) -> bool:
        return any(r.pattern == pattern for r in self._rules)

    @staticmethod
    def check(pattern: str) -> str | None:
        """None if the pattern is usable, else the one-line reason."""
        try:
            check(pattern)
        except PatternError as exc:
            return str(exc)
        return None

    def add(self, pattern: str) -> IgnoreRule:
        """Add a checked pattern (PatternError if it is not usable); an existing one is returned as is."""
        for rule in self._rules:
            if rule.pattern == pattern:
                return rule
        check(pattern)
        rule = IgnoreRule(pattern, self._clock())
        self._rules.append(rule)
        self._rebuild()
        return rule

    def remove(self, pattern: str) -> bool:
        before = len(self._rules)
        self._rules = [r for r in self._rules if r.pattern != pattern]
        if len(self._rules) == before:
            return False
        self._rebuild()
        return True

    # -- sets --------------------------------------------------------------------------
    def enable_set(self, name: str) -> list[IgnoreRule]:
        """Add a set's patterns (ValueError for an unknown set); returns the rules added
        (none if it was on already). A pattern already present keeps its first rule."""
        if name in self.enabled_sets():
            return []
        have = {r.pattern for r in self._rules}
        now = self._clock()
        s = load(name)
        added = [IgnoreRule(p.pattern, now, source=name) for p in s.patterns if p.pattern not in have]
        if s.repeats:
            added.append(IgnoreRule(REPEATS, now, source=name))
        self._rules += added
        self._rebuild()
        return added

    def disable_set(self, name: str) -> bool:
        before = len(self._rules)
        self._rules = [r for r in self._rules if r.source != name]
        if len(self._rules) == before:
            return False
        self._rebuild()
        return True

    def enabled_sets(self) -> list[str]:
        return list(dict.fromkeys(r.source for r in self._rules if r.source))

    def sync_sets(self, names: tuple[str, ...] | list[str]) -> None:
        """Exactly these sets on (a start: the crawl's settings), keeping counts of those on."""
        for name in self.enabled_sets():
            if name not in names:
                self.disable_set(name)
        for name in names:
            self.enable_set(name)

    def _rebuild(self) -> None:
        self._index()
        self.changed()

    def _index(self) -> None:
        self._regex = [r for r in self._rules if r.pattern != REPEATS]
        self._repeats = next((r for r in self._rules if r.pattern == REPEATS), None)
        self._set = PatternSet([r.pattern for r in self._regex])

    def changed(self) -> None:
        """Tell the persistence hook (counts changed, or the list)."""
        if self.on_change is not None:
            self.on_change(self.to_json())

    def match(self, url: str) -> IgnoreRule | None:
        """The first rule (in the order added) whose pattern is found in `url`."""
        if not self._rules:
            return None
        hits = self._set.match(url)
        if hits:
            return self._regex[min(hits)]
        if self._repeats is not None and repeated_segments(url):
            return self._repeats
        return None

    def rules(self) -> list[IgnoreRule]:
        return list(self._rules)

    def views(self) -> tuple[IgnoreView, ...]:
        return tuple(IgnoreView(r.pattern, r.added, r.dropped, r.stopped, r.source) for r in self._rules)

    def to_json(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in self._rules]

    def load(self, saved: Any) -> None:
        """Rules saved by to_json() (a resume). Unusable entries are skipped, never fatal."""
        rules: list[IgnoreRule] = []
        for raw in saved if isinstance(saved, list) else ():
            try:
                pattern = str(raw["pattern"])
                source = str(raw.get("source") or "")
                if not (source and pattern == REPEATS):
                    check(pattern)
                rules.append(IgnoreRule(pattern, float(raw.get("added", 0.0)),
                                        int(raw.get("dropped", 0)), int(raw.get("stopped", 0)), source))
            except (KeyError, TypeError, ValueError, PatternError):
                continue
        self._rules = rules
        self._index()
