"""The crawl's rules for the requests a browser tab makes (core/fetching/tabroutes.py `Rules`).

What a page may load in its tab (--exclude, the ignores, robots.txt), and claiming what it
loads, so that each such URL ends in one Record from the tab's answer (core/processing.py)
and aiohttp never fetches it again, in this process or any other of a shared crawl. Made
by the crawl only with --browser.
"""
from __future__ import annotations

from typing import Protocol

from ..config import CrawlConfig
from ..monitor.stats import Stats
from ..queueing.frontier import Frontier
from ..queueing.kinds import Kinds
from ..queueing.scope import Scope
from ..steering.steer import Steering
from .robots import Robots
from .tabturns import SharedHosts

# Why a tab's request is refused (`BrowserRules.refusal`); ROBOTS is also the words of its
# skip Record (core/processing.py makes it a BlockedByRobots, as the aiohttp path does)
EXCLUDED, IGNORED, ROBOTS = "excluded", "ignored", "disallowed by robots.txt"


class Rules(Protocol):
    """The crawl's rules for a browser's own requests, as a tab's routes (core/fetching/tabroutes.py)
    ask them; `BrowserRules` below implements them."""

    async def refusal(self, url: str) -> str | None:
        """Why the tab may not request this canonical URL (--exclude, ignores, robots.txt:
        browser_rules.py's words), None when it may."""
        ...

    def robots_refused(self) -> None:
        """A URL robots.txt refused was claimed for its skip Record: count it."""
        ...

    def shared_hosts(self) -> SharedHosts | None:
        """The crawl's hosts when their state lives in Redis (tabs take turns there), else None."""
        ...

    async def claim(self, url: str) -> bool:
        """Mark the URL seen for this tab to record; False if seen before, or not to be
        recorded (--no-requisites, --max-pages)."""
        ...


class BrowserRules:
    __slots__ = ("config", "stats", "frontier", "scope", "kinds", "steering", "robots")

    def __init__(self, config: CrawlConfig, stats: Stats, frontier: Frontier, scope: Scope, kinds: Kinds,
                 steering: Steering, robots: Robots | None) -> None:
        self.config, self.stats, self.frontier, self.scope = config, stats, frontier, scope
        self.kinds, self.steering, self.robots = kinds, steering, robots

    async def refusal(self, url: str) -> str | None:
        """Why the tab may not request this URL (None: it may), as the aiohttp path refuses
        it: --exclude (nothing counted, as for an excluded link), an ignore (asked of URLs
        never seen, as for links; counted when the page's links are read, as on the aiohttp
        path, so a URL the page both loads and links is counted once), robots.txt (its skip
        Record and count come with its claim: `robots_refused`)."""
        if self.scope.excluded(url):
            return EXCLUDED
        ignores = self.steering.ignore_rules
        if ignores and not self.frontier.seen(url) and ignores.match(url) is not None:
            return IGNORED
        if self.robots is not None and not (await self.robots.check(url))[0]:
            return ROBOTS
        return None

    def robots_refused(self) -> None:
        """A URL robots.txt refused was claimed for its skip Record: counted once, as the
        aiohttp path counts the Record it makes (core/fetching/attempt.py `cleared`)."""
        self.stats.robots_blocked += 1

    def shared_hosts(self) -> SharedHosts | None:
        """On Redis the crawl's hosts live there (core/cluster/frontier.py `turn`): a tab's
        requests take their turns in Redis, shared by every engine."""
        return self.frontier if isinstance(self.frontier, SharedHosts) else None

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
