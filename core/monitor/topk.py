"""A counter whose largest entries can be read without scanning it: O(1) per +1/-1,
O(k) for the top k.

The classic constant-time LFU layout: keys are kept in buckets by count, and the
non-empty counts form a doubly linked list in order. A +1 or -1 moves a key to the
neighbouring bucket (creating it next to the old one if needed, unlinking an emptied
one), so the list never needs sorting and `top(k)` walks down from the highest count.
The queue view uses it for URL prefixes with a million queued URLs; a heap or a sort
over all prefixes per frame would cost O(prefixes).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class RankedCounter(Generic[K]):
    __slots__ = ("counts", "_members", "_up", "_down", "_max")

    def __init__(self) -> None:
        self.counts: dict[K, int] = {}
        self._members: dict[int, dict[K, None]] = {0: {}}  # count -> keys (insertion-ordered)
        self._up: dict[int, int] = {}  # count -> next higher non-empty count
        self._down: dict[int, int] = {}  # count -> next lower non-empty count (0 is the floor)
        self._max = 0

    def __len__(self) -> int:
        return len(self.counts)

    def get(self, key: K) -> int:
        return self.counts.get(key, 0)

    def incr(self, key: K) -> int:
        c = self.counts.get(key, 0)
        n = c + 1
        bucket = self._members.get(n)
        if bucket is None:  # link bucket n right above bucket c
            bucket = self._members[n] = {}
            above = self._up.get(c)
            if above is not None:
                self._up[n] = above
                self._down[above] = n
            self._up[c] = n
            self._down[n] = c
            if n > self._max:
                self._max = n
        bucket[key] = None
        self.counts[key] = n
        if c:
            self._leave(key, c)
        return n

    def decr(self, key: K) -> int:
        """-1; a key at 0 is forgotten. A key not counted stays at 0 (never negative)."""
        c = self.counts.get(key, 0)
        if not c:
            return 0
        n = c - 1
        if n:
            bucket = self._members.get(n)
            if bucket is None:  # link bucket n right below bucket c
                bucket = self._members[n] = {}
                below = self._down[c]
                self._down[n] = below
                self._up[below] = n
                self._up[n] = c
                self._down[c] = n
            bucket[key] = None
            self.counts[key] = n
        else:
            del self.counts[key]
        self._leave(key, c)
        return n

    def _leave(self, key: K, c: int) -> None:
        bucket = self._members[c]
        del bucket[key]
        if bucket:
            return
        del self._members[c]
        below = self._down.pop(c)
        above = self._up.pop(c, None)
        if above is None:
            del self._up[below]
            self._max = below
        else:
            self._up[below] = above
            self._down[above] = below

    def top(self, k: int) -> Iterator[tuple[K, int]]:
        """The k largest (key, count), largest first; ties in the order they reached it."""
        c = self._max
        while c and k > 0:
            for key in self._members[c]:
                yield key, c
                k -= 1
                if k <= 0:
                    return
            c = self._down[c]
