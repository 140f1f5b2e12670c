"""User regexes (ignores, --include, --exclude) on RE2: linear time, whatever the pattern.

User patterns run on every link the crawl finds, so a catastrophic pattern such as
`(a+)+$` must not freeze the event loop. Python's `re` backtracks (exponential on that
pattern); RE2 (google-re2) never does. A pattern that needs something RE2 lacks
(lookarounds, backreferences, possessive quantifiers) is refused with a message that
says so: there is no silent fallback to `re`.

Matching goes through `re2.Set` (all patterns of one kind in one automaton): one call
per URL however many patterns there are, about 2 us, where `_Regexp.search` of the
Python wrapper costs ~10 us per pattern.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from ..errors import PatternError


@cache
def _re2() -> Any:
    """google-re2 (untyped), imported once a pattern is given: 1.5 MB of RSS a crawl
    without patterns never needs (docs/benchmarks/memory.md, "Peak memory on large pages,
    continued")."""
    import re2  # type: ignore[import-untyped]  # google-re2 has no type hints

    return re2


def _options() -> Any:
    re2 = _re2()
    opts = re2.Options()
    opts.log_errors = False  # RE2 would otherwise print to stderr, over the TUI
    opts.never_capture = True
    return opts


def check(pattern: str) -> None:
    """Raise PatternError with the reason if RE2 cannot compile `pattern`."""
    if not pattern:
        raise PatternError("empty pattern (it would match every URL)")
    re2 = _re2()
    try:
        re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        try:
            re.compile(pattern)
        except re.error:
            raise PatternError(f"bad regex {pattern!r}: {reason}") from None
        raise PatternError(
            f"regex {pattern!r} needs a feature RE2 lacks (lookaround, backreference, possessive or "
            f"atomic group; crawltop matches in linear time): {reason}"
        ) from None


class PatternSet:
    """Several patterns searched at once; `match(url)` gives the indexes that hit."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        self._set: Any = None  # a re2.Set
        if self.patterns:
            s = _re2().Set.SearchSet(_options())
            for p in self.patterns:
                check(p)
                s.Add(p)
            s.Compile()
            self._set = s

    def __bool__(self) -> bool:
        return self._set is not None

    def match(self, url: str) -> list[int]:
        """Indexes of the patterns found in `url` (unordered); [] if none."""
        if self._set is None:
            return []
        return self._set.Match(url) or []

    def search(self, url: str) -> bool:
        return self._set is not None and self._set.Match(url) is not None
