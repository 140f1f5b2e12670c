"""A ceiling on the memory one parse may take, so one hostile page can't take the machine.

Why: lexbor copies every open formatting element with distinct attributes into each new
block ("reconstruct the active formatting elements"; Noah's Ark stops only identical ones).
26 KB of such markup builds 400,000 nodes (163 MB), 69 KB five million (1.9 GB), and a few
hundred KB would take all the memory there is. Finding that markup before the parse costs a
tenth of a page's CPU (a regex over every page), and lexbor has no limit to set. But it
checks its allocations: when one fails mid-parse it stops and says it can't parse. So, for
the parse only, the address-space limit (RLIMIT_AS) is lowered to the process's size, read
fresh (one pread of /proc/self/statm), plus HEADROOM, then put back: about 2 µs a page.

The limit is the process's, and lexbor parses without the GIL: a thread that allocates
while a hostile page has filled the headroom (the WARC or SQLite writer) can get a
MemoryError. That takes an attack, at that moment; the tests saw none.

Elsewhere than Linux (no /proc/self/statm, no RLIMIT_AS) there is no ceiling. A limit the
user set lower (`ulimit -v`) is left as it is.
"""
from __future__ import annotations

import os
from types import TracebackType

try:
    import resource
except ImportError:  # not Unix
    resource = None  # type: ignore[assignment]

HEADROOM = 256 << 20  # what one parse may add: under the tag cap a legitimate tree stays near 100 MB
_STATM = "/proc/self/statm"


class Ceiling:
    """`with CEILING:` around a parse; nothing to do where it can't work."""

    def __init__(self) -> None:
        self._works = resource is not None and hasattr(resource, "RLIMIT_AS") and os.path.exists(_STATM)
        self._original: tuple[int, int] | None = None  # the limit as found (nothing else in crawltop sets it)
        self._fd = -1
        self._page = os.sysconf("SC_PAGE_SIZE") if self._works else 0
        self._lowered = False
        if self._works:  # /proc/self is resolved at open: a forked child opens its own
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._fd = -1

    def _size(self) -> int:
        """The process's address space now, in bytes."""
        if self._fd < 0:
            self._fd = os.open(_STATM, os.O_RDONLY)
        return int(os.pread(self._fd, 64, 0).split(None, 1)[0]) * self._page

    def __enter__(self) -> None:
        if not self._works:
            return
        try:
            if self._original is None:
                self._original = resource.getrlimit(resource.RLIMIT_AS)
            soft, hard = self._original
            limit = self._size() + HEADROOM
            unlimited = resource.RLIM_INFINITY
            if (soft != unlimited and soft <= limit) or (hard != unlimited and hard < limit):
                return  # the user's own limit is lower: leave it
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            self._lowered = True
        except (OSError, ValueError):
            self._works = False

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._lowered and self._original is not None:
            self._lowered = False
            resource.setrlimit(resource.RLIMIT_AS, self._original)


CEILING = Ceiling()
