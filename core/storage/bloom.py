"""The Bloom filter that keeps the store's seen set in memory (see core/storage/store.py)."""
from __future__ import annotations


class BloomFilter:
    """A scalable, blocked Bloom filter over Python's str hash (stable within one process;
    the filter is rebuilt at every open).  Each URL sets 4 bits of one 64-bit word, so a
    probe is one word read; 16 bits per URL gives ~0.1-0.5% false positives, each of which
    costs one primary-key lookup, never a wrong answer.  When full, a filter twice the
    size is added; lookups probe each filter."""

    BITS_PER_ITEM = 16

    def __init__(self, capacity: int) -> None:
        self._filters: list[tuple[memoryview, int]] = []
        self._capacity = 0
        self._count = 0
        self._slab = 1 << 16
        while self._slab < capacity:
            self._slab <<= 1
        self._grow()

    def _grow(self) -> None:
        words = self._slab * self.BITS_PER_ITEM // 64  # a power of two: indexes are masked
        self._filters.append((memoryview(bytearray(words * 8)).cast("Q"), words - 1))
        self._words, self._mask = self._filters[-1]
        self._capacity += self._slab
        self._slab <<= 1

    def __contains__(self, url: str) -> bool:
        h = hash(url)
        g = h >> 40
        wm = (1 << (g & 63)) | (1 << (g >> 6 & 63)) | (1 << (g >> 12 & 63)) | (1 << (g >> 18 & 63))
        for words, mask in self._filters:
            if words[h & mask] & wm == wm:
                return True
        return False

    def check_add(self, url: str) -> bool:
        """True if url may be present (nothing changes); else add it and return False."""
        h = hash(url)
        g = h >> 40
        wm = (1 << (g & 63)) | (1 << (g >> 6 & 63)) | (1 << (g >> 12 & 63)) | (1 << (g >> 18 & 63))
        words, mask = self._words, self._mask
        w = h & mask
        if words[w] & wm == wm:
            return True
        if len(self._filters) > 1:
            for older, omask in self._filters[:-1]:
                if older[h & omask] & wm == wm:
                    return True
        if self._count >= self._capacity:
            self._grow()
            words, mask = self._words, self._mask
            w = h & mask
        self._count += 1
        words[w] |= wm
        return False

    def add(self, url: str) -> None:
        self.check_add(url)

    @property
    def nbytes(self) -> int:
        return sum(len(b) * 8 for b, _ in self._filters)
