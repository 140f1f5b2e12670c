"""robots.txt: fetched once per origin, shared by every worker that asks meanwhile.

Unreachable or failing robots.txt (network error, 5xx) and 4xx all mean "allow all":
the crawl goes on and the fetch problem shows up on the pages themselves.
"""
from __future__ import annotations

import asyncio

import aiohttp
from protego import Protego

from ..parsing.urls import host_origin
from .fetch import read_capped

ROBOTS_MAX_BYTES = 512 * 1024  # what Google reads; a hostile server can't feed us more


class Robots:
    def __init__(self, session: aiohttp.ClientSession, agent: str, timeout: float) -> None:
        self._session = session
        self._agent = agent
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._rules: dict[str, asyncio.Future[Protego | None]] = {}
        self.unanswered: set[str] = set()  # origins whose robots.txt got no HTTP response at all

    async def _fetch(self, origin: str) -> Protego | None:
        try:
            async with self._session.get(
                origin + "/robots.txt", timeout=self._timeout, max_redirects=5
            ) as resp:
                if resp.status >= 400:
                    return None
                body, _ = await read_capped(resp, ROBOTS_MAX_BYTES)
                return Protego.parse(body.decode("utf-8", errors="replace"))
        except (aiohttp.ClientResponseError, ValueError, UnicodeError):
            return None
        except (aiohttp.ClientError, TimeoutError, OSError):
            self.unanswered.add(origin)  # the host's failure (core/crawler.py _prerequisite)
            return None

    async def rules(self, origin: str) -> Protego | None:
        fut = self._rules.get(origin)
        if fut is None:
            fut = self._rules[origin] = asyncio.ensure_future(self._fetch(origin))
        # shield: a cancelled worker must not cancel the fetch others are waiting on
        return await asyncio.shield(fut)

    def pending(self, url: str) -> bool:
        """True while the origin's robots.txt is not known yet: a check now waits for it."""
        fut = self._rules.get(host_origin(url))
        return fut is None or not fut.done()

    async def check(self, url: str) -> tuple[bool, float]:
        """(allowed, crawl-delay seconds) for this URL."""
        origin = url[: url.find("/", url.find("//") + 2)]
        rules = await self.rules(origin)
        if rules is None:
            return True, 0.0
        return rules.can_fetch(url, self._agent), float(rules.crawl_delay(self._agent) or 0.0)

    def close(self) -> None:
        for fut in self._rules.values():
            fut.cancel()
