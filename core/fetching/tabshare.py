"""What one browser's tabs share: the answers one tab loaded, served to the others.

A URL a page's scripts or layout need (a script, a stylesheet, a font, an XHR) is claimed
and recorded once, by the first tab that asks; a later tab that asks for it is served from
here rather than sending a second, unrecorded request to the server. What another engine of
a shared crawl claimed is fetched here unrecorded, once, and kept the same way. Apart from a tab's
routes (core/fetching/tabroutes.py) because it outlives every tab and every restart of the
browser: it is the crawl's, bounded in bytes (SHARED_BYTES), oldest answers dropped first.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict

SHARED_BYTES = 32 << 20  # answers kept to serve other tabs' requests for the same URL


class Kept:
    """An answer kept to serve another tab's request for the same URL."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class Shared:
    """URLs this browser loaded (or is loading) for a page: other tabs are served from here."""

    def __init__(self) -> None:
        self._shared: OrderedDict[str, asyncio.Future[Kept | None]] = OrderedDict()
        self._shared_bytes = 0

    def shared(self, url: str) -> asyncio.Future[Kept | None] | None:
        """The load of `url` to wait on, if any. One cancelled (never set by its tab, e.g. an
        event loop torn down under it) is dropped: it holds no answer, and must not cancel
        every later tab that asks."""
        fut = self._shared.get(url)
        if fut is not None:
            if fut.cancelled():
                del self._shared[url]
                return None
            self._shared.move_to_end(url)
        return fut

    def share(self, url: str) -> asyncio.Future[Kept | None]:
        fut: asyncio.Future[Kept | None] = asyncio.get_running_loop().create_future()
        self._shared[url] = fut
        return fut

    def kept(self, url: str, fut: asyncio.Future[Kept | None], kept: Kept | None) -> None:
        """The answer of a load other tabs may wait for. None (failed, or no complete 2xx)
        wakes them to request it themselves and forgets the URL: one bad load must not
        spoil the URL for every later tab."""
        if fut.done():
            return
        fut.set_result(kept)
        if kept is None:
            if self._shared.get(url) is fut:
                del self._shared[url]
            return
        self._shared_bytes += len(kept.body)
        while self._shared_bytes > SHARED_BYTES and self._shared:
            url, old = next(iter(self._shared.items()))
            if not old.done():
                break
            del self._shared[url]
            gone = None if old.cancelled() else old.result()
            self._shared_bytes -= len(gone.body) if gone is not None else 0
