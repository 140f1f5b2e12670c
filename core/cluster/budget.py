"""--max-pages for a crawl in partitions: a count in the control `meta` (`granted`) that
processes take in blocks.

With one partition, the scripts stop the seen set at N themselves (it is one set). With P,
the seen set is P sets on as many slots, and no script sees them all: so each process
holds a share of N taken from the control slot (partscripts.GRANT), a call may add at most
that share to the seen set (its MAXPAGES argument), and what a call did not use beyond a
block goes back for the others. The crawl never passes N; it may stop short of it by a
block a process (N / 16, at most 64), held where no link was left to use it.
"""
from __future__ import annotations

import asyncio

from redis.commands.core import AsyncScript

from .link import Link

BLOCK = 64  # at most this many URLs taken at a time


class Budget:
    def __init__(self, link: Link, grant: AsyncScript, meta: str, max_pages: int) -> None:
        self.link, self.grant, self.meta, self.max_pages = link, grant, meta, max_pages
        self.allow = 0  # what this process may still add to the seen set
        self.lock = asyncio.Lock()  # one call adding links at a time (reserve)
        self.block = max(1, min(BLOCK, max_pages // 16))

    def cap(self) -> int:
        """A call's MAXPAGES: 0 no limit, -1 nothing left, else what this process holds."""
        if not self.max_pages:
            return 0
        return self.allow if self.allow > 0 else -1

    async def reserve(self, need: int) -> int:
        """Up to `need` URLs of what this process holds, for one call (taken from the control
        slot first if it holds too little), under `lock`: the caller gives back what the call
        did not use (`allow +=`); a call that may have run without an answer keeps its share,
        so a URL is never counted twice."""
        await self.top_up(need)
        held = min(self.allow, max(1, need))
        self.allow -= held
        return held

    async def top_up(self, need: int = 1) -> None:
        """Hold enough for a call that may add `need` URLs (what is left of N, if less)."""
        want = max(need, (self.block + 1) // 2) - self.allow
        if self.max_pages and want > 0:
            ask = max(want, self.block)
            self.allow += int(await self.link.call(lambda: self.grant([self.meta], [self.max_pages, ask])))

    async def give_back(self, keep: int | None = None) -> None:
        """Keep one block (or `keep`): the rest goes back for the other processes."""
        extra = self.allow - (self.block if keep is None else keep)
        if self.max_pages and extra > 0:
            await self.link.call(lambda: self.grant([self.meta], [self.max_pages, -extra]))
            self.allow -= extra
