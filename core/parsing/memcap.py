"""A ceiling on the memory one parse may take, so one hostile page can't take the machine.

Why: lexbor copies every open formatting element with distinct attributes into each new
block ("reconstruct the active formatting elements"; Noah's Ark stops only identical ones).
26 KB of such markup builds 400,000 nodes (163 MB), 69 KB five million (1.9 GB), and a few
hundred KB would take all the memory there is. Finding that markup before the parse costs a
tenth of a page's CPU (a regex over every page), and lexbor has no limit to set. But it
checks its allocations: when one fails it stops and says it can't parse. So, for the parse
only, the address-space limit (RLIMIT_AS) is lowered to the process's size plus HEADROOM,
then put back: two system calls a page. The size is read at most once a second.

Elsewhere than Linux (no /proc/self/statm, no RLIMIT_AS) there is no ceiling. A limit the
user set lower (`ulimit -v`) is left as it is.
"""
from __future__ import annotations

import os
import time
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
        self._original: tuple[int, int] = (-1, -1)
        self._limit = -1
        self._read_at = float("-inf")
        self._lowered = False

    def __enter__(self) -> None:
        if not self._works:
            return
        now = time.monotonic()
        if now - self._read_at > 1.0:
            self._read_at = now
            try:
                if self._original == (-1, -1):
                    self._original = resource.getrlimit(resource.RLIMIT_AS)
                with open(_STATM, "rb") as fh:
                    size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError):
                self._works = False
                return
            soft, hard = self._original
            self._limit = size + HEADROOM
            unlimited = resource.RLIM_INFINITY
            if (soft != unlimited and soft <= self._limit) or (hard != unlimited and hard < self._limit):
                self._limit = -1  # the user's own limit is lower: leave it
        if self._limit < 0:
            return
        try:
            resource.setrlimit(resource.RLIMIT_AS, (self._limit, self._original[1]))
            self._lowered = True
        except (OSError, ValueError):
            self._works = False

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._lowered:
            self._lowered = False
            resource.setrlimit(resource.RLIMIT_AS, self._original)


CEILING = Ceiling()
