"""The crawl's rules for the requests a browser tab makes (core/fetching/tabroutes.py `Rules`).

What a page may load in its tab (--exclude, the ignores, robots.txt), and claiming what it
loads, so that each such URL ends in one Record from the tab's answer (core/processing.py)
and aiohttp never fetches it again, in this process or any other of a shared crawl. Made
by the crawl only with --browser.
"""
from __future__ import annotations

from ..config import CrawlConfig
from ..monitor.stats import Stats
from ..queueing.frontier import Frontier
from ..queueing.kinds import Kinds
from ..queueing.scope import Scope
from ..steering.steer import Steering
from .robots import Robots


class BrowserRules:
    __slots__ = ("config", "stats", "frontier", "scope", "kinds", "steering", "robots")

    def __init__(self, config: CrawlConfig, stats: Stats, frontier: Frontier, scope: Scope, kinds: Kinds,
                 steering: Steering, robots: Robots | None) -> None:
        self.config, self.stats, self.frontier, self.scope = config, stats, frontier, scope
        self.kinds, self.steering, self.robots = kinds, steering, robots

    async def allow(self, url: str) -> bool:
        """--exclude, the ignores (asked of URLs never seen, as for links) and robots.txt."""
        if self.scope.excluded(url):
            return False
        if self.steering.ignore_rules and not self.frontier.seen(url) and self.steering.stopped(url):
            return False
        if self.robots is not None and not (await self.robots.check(url))[0]:
            self.stats.robots_blocked += 1
            return False
        return True

    async def claim(self, url: str) -> bool:
        """Seen from now on, to be recorded from the tab's answer; not with --no-requisites,
        nor past --max-pages. The frontier's claim is exact across processes (on Redis the
        seen set answers yes to one engine only, and holds --max-pages there: `seen_count`
        here is as of the last round trip, low, so it only spares a call once the cap is
        reached)."""
        if not self.kinds.requisites:
            return False
        if self.config.max_pages is not None and self.frontier.seen_count >= self.config.max_pages:
            return False
        return await self.frontier.claim(url)
