"""glibc's malloc, told to give the memory of a large parse back to the system.

Why: a large page's body, its slim copy and its Lexbor tree are tens of MB, allocated in
pieces and freed together a moment later. glibc serves large requests with mmap (given
back at free) only above a threshold that it raises to the size of every mmapped block
freed, up to 32 MB: after the first large page, the next ones come from the heap, whose
freed top is kept for reuse. RSS then stays at the largest page's peak for the rest of
the crawl. Pinning the threshold keeps large blocks mmapped; malloc_trim() after a large
page returns the heap's free pages. Elsewhere than glibc both are no-ops.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_THRESHOLD = 256 * 1024
# Pinning the mmap threshold also pins the trim threshold at its 128 KB default: the heap's
# top would then go back to the system after almost every burst of frees and be faulted in
# again at once (hundreds of thousands of page faults a crawl). Large blocks are mmapped
# anyway, and trim() gives the heap back after a large parse.
_TRIM_THRESHOLD = 16 * 1024 * 1024


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018  (musl has neither: AttributeError)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def pin_mmap_threshold() -> None:
    """Blocks of 256 KB and more always come from mmap, so their free gives them back."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def trim() -> None:
    """Return the free pages of the heap to the system (after a large parse)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
