"""How a page is fetched, behind one small interface (httpx's transports are the model).

`Crawler` (core/crawler.py) is the worker pool. Its attempt (core/fetching/attempt.py:
robots, the host's accounting, retries) asks a `Fetcher` for one request and gets a
`Response` (core/fetching/fetch.py): the page's own answer, and, from a browser, `dom` (the
HTML once scripts ran, for links) and `loaded` (every other URL the page loaded, each with its
answer). core/processing.py makes of it Records, WARC records and links, the same way
whichever fetcher ran. Two implementations:

- `HttpFetcher`: one aiohttp GET (`fetch_once`), the path of every URL by default;
- `BrowserFetcher` (core/fetching/browser.py, `--browser`): the page in a Chromium tab.
"""
from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import aiohttp

from .budget import BodyBudget
from .fetch import Response, fetch_once


class Fetcher(Protocol):
    async def fetch(self, url: str, reading: Callable[[], None], sent: Callable[[], None] | None,
                    phase: Callable[[str], None]) -> Response:
        """One attempt, redirects not followed. `reading` is called once the response's
        headers are in, `sent` when the request's headers leave (None: not wanted), `phase`
        as the request moves on (core/fetching/steps.py). Network failures raise what
        aiohttp raises (OSError, aiohttp.ClientError, TimeoutError): the caller retries."""
        ...


class HttpFetcher:
    """Today's fetch: one aiohttp GET through the crawl's session, body capped and counted
    against the crawl's BodyBudget. A thin call: the per-page hot path pays one frame."""

    __slots__ = ("session", "max_bytes", "budget")

    def __init__(self, session: aiohttp.ClientSession, max_bytes: int, budget: BodyBudget) -> None:
        self.session, self.max_bytes, self.budget = session, max_bytes, budget

    def fetch(self, url: str, reading: Callable[[], None], sent: Callable[[], None] | None,
              phase: Callable[[str], None]) -> Coroutine[Any, Any, Response]:
        """fetch_once's coroutine itself, not one awaiting it: no frame of our own per page."""
        return fetch_once(self.session, url, self.max_bytes, reading, sent, phase, self.budget)
