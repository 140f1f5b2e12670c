"""The dashboard's model: every crawl of this user on this machine, live or ended.

Live crawls are the run directory's sockets (core/sockets/rundir.py), each watched through a
`Link` (core/sockets/watch.py) that asks for an O(1) summary per tick. Ended crawls are the
summaries they left (core/sockets/ended.py), shown until dismissed. A socket nobody listens
on, or a link that drops without the crawl's bye, is a crawl whose process died: its row
says `lost` (with its last numbers, if this board saw any), the dead socket is removed as
`ls` does, and a summary is left for the other dashboards, so it is reported once.

With a Redis URL, the crawls shared through that Redis are rows too, named `NAME@redis`
(core/dashboard/shared.py reads them; their keys write the crawl's control hash).

No Textual here: the TUI (tui/top/) calls `tick()` from its timer and reads `rows`.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RemoteError
from ..monitor.summary import Summary, from_wire, to_wire
from ..sockets import ended
from ..sockets.rundir import NAME, clean_stale, is_live, run_dir
from ..sockets.watch import Link

if TYPE_CHECKING:  # redis is imported only by a board given a Redis URL
    import redis.asyncio as aioredis

    from .shared import RedisCrawl

SCAN = 1.0  # seconds between looks at the run directory for new crawls
# Rows off the screen are asked every HIDDEN seconds, not every tick: each request wakes a
# crawl's process, and on a small VM that wake-up, not the O(1) summary, is the cost
# (bench/dashboard.py: ~0.4 ms of the crawl's CPU per request here).
HIDDEN = 2.0
ENDED_SCAN = 2.0  # and at the ended summaries


CRASHED = {"failed": "crashed"}  # an .ended file of an engine before the word changed


@dataclass
class Row:
    """One crawl's line on the dashboard."""

    name: str
    root: str = ""
    pid: int = 0
    started: float = 0.0
    mode: str = ""
    paused: bool = False
    summary: Summary | None = None
    how: str = ""  # "" while it runs; else done, stopped, crashed, lost
    by: str = ""  # who stopped it
    ended: float | None = None
    problem: str = ""  # a live row whose numbers are not current: "not answering", "bad data"

    @property
    def live(self) -> bool:
        return not self.how

    @property
    def state(self) -> str:
        """RUNNING, PAUSED, STOPPING; or how it ended, in words."""
        if self.how == "stopped":  # "stopped (ctl)": who asked, in a word (the detail line says more)
            return f"stopped ({self.by.removeprefix('crawltop ')})" if self.by else "stopped"
        if self.how:
            return self.how
        if self.problem:
            return self.problem
        return self.summary.state if self.summary is not None else "starting"


class Board:
    """Every crawl's row, kept fresh by `tick()`."""

    def __init__(self, redis_url: str | None = None) -> None:
        self.redis_url = redis_url
        self.redis_problem = ""  # why the Redis rows are not fresh, if they are not
        self._redis: aioredis.Redis | None = None
        self._shared: dict[str, RedisCrawl] = {}
        self._redis_scanned = -SCAN
        self.links: dict[str, Link] = {}
        self.rows: dict[str, Row] = {}
        self.lost_now: list[str] = []  # names found lost since the last look (the TUI says so once)
        self._scanned = -SCAN
        self._read_ended = -ENDED_SCAN
        self._ended_seen: dict[str, float] = {}  # name -> the ended time shown
        self._dismissed: dict[str, float] = {}  # name -> the ended time dismissed here
        # One tick at a time: the refresh loop and a key's refresh_now() must not both scan
        # (two Links for one crawl) nor both handle an ended one (deleted twice).
        self._ticking = asyncio.Lock()

    async def tick(self, now: float | None = None, shown: set[str] | None = None) -> None:
        """Ask the live crawls for their summaries (those not `shown` on the screen only every
        HIDDEN seconds); look for new and ended crawls now and then. Ticks never overlap: a
        second caller waits for the first, then ticks itself."""
        async with self._ticking:
            await self._tick(now, shown)

    async def _tick(self, now: float | None, shown: set[str] | None) -> None:
        now = time.monotonic() if now is None else now
        if now - self._scanned >= SCAN:
            self._scanned = now
            await self._scan()
        for name, link in list(self.links.items()):
            if link.connected:
                if shown is None or name in shown or now - link.asked >= HIDDEN:
                    link.asked = now
                    link.ask()
                self._show_link(link)
            else:
                await self._gone(name, link)
        if now - self._read_ended >= ENDED_SCAN:
            self._read_ended = now
            self._load_ended()
        if self.redis_url is not None:
            await self._tick_redis(now)

    # -- crawls shared through Redis -------------------------------------------------------
    async def _tick_redis(self, now: float) -> None:
        from redis.exceptions import RedisClusterException, RedisError

        from ..cluster import connect as cluster
        from .shared import SUFFIX, RedisCrawl, names

        try:
            if self._redis is None:
                self._redis = cluster.client(self.redis_url or "")
            if now - self._redis_scanned >= SCAN:
                self._redis_scanned = now
                for name in await names(self._redis):
                    self._shared.setdefault(name, RedisCrawl(name))
            crawls = list(self._shared.values())
            results = await asyncio.gather(*(c.read(self._redis, now) for c in crawls), return_exceptions=True)
            for c, result in zip(crawls, results, strict=True):
                if isinstance(result, RedisError | RedisClusterException | OSError):
                    raise result
                # anything else is this crawl's data (a row not in the shape engines write): its row says so
                c.problem = "bad data" if isinstance(result, Exception) else ""
            self.redis_problem = ""
        except (RedisError, RedisClusterException, OSError, ValueError) as exc:  # a cluster's map being rebuilt too
            self.redis_problem = f"Redis at {self.redis_url}: {exc}"[:200]
        for c in self._shared.values():
            key = c.name + SUFFIX
            how = "" if c.status == "running" else ("done" if c.status == "finished" else "stopped")
            if how and key in self._dismissed:
                continue
            self.rows[key] = Row(key, root=c.root, started=c.started, mode="redis", paused=c.paused,
                                 summary=c.summary, how=how, problem=c.problem)

    def look_now(self) -> None:
        """Look at the run directory at the next tick (a crawl was just started)."""
        self._scanned = -SCAN

    # -- live crawls ------------------------------------------------------------------
    def _sockets(self) -> list[Path]:
        d = run_dir(create=False)
        try:
            entries = list(os.scandir(d))
        except OSError:
            return []
        out = []
        for e in entries:
            if e.name.startswith(".") or not NAME.fullmatch(e.name) or e.name in self.links:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid():
                out.append(Path(e.path))
        return out

    async def _scan(self) -> None:
        paths = self._sockets()
        if not paths:
            return
        results = await asyncio.gather(*(Link.open(p) for p in paths), return_exceptions=True)
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, Link):
                self.links[path.name] = result
                result.ask()
            elif isinstance(result, RemoteError) and clean_stale(path):
                self._lost(path.name, self.rows.get(path.name))  # a socket nobody listens on: killed

    def _show_link(self, link: Link) -> None:
        row = self.rows.get(link.name)
        if row is None or not row.live:
            row = self.rows[link.name] = Row(link.name)
        row.root, row.pid, row.started = link.root, link.pid, link.started
        row.mode, row.paused = link.mode, link.paused
        row.problem = "" if link.answering else "not answering"
        if link.summary is not None:
            row.summary = link.summary

    async def _gone(self, name: str, link: Link) -> None:
        del self.links[name]
        self._show_link(link)
        await link.close()
        if link.lost and await asyncio.to_thread(is_live, link.path):
            # only this connection dropped, the crawl still listens: connect again at the next tick
            self._scanned = -SCAN
        elif link.lost:
            with contextlib.suppress(OSError):
                clean_stale(link.path)
            self._lost(name, self.rows.get(name))
        else:  # it ended and left its summary (or an older engine did not: say done)
            self._load_ended()
            row = self.rows.get(name)
            if row is not None and row.live:
                row.how, row.ended = ("crashed" if link.ended == "failed" else "done"), time.time()

    def _lost(self, name: str, last: Row | None) -> None:
        row = Row(name, how="lost", ended=time.time())
        if last is not None:
            row.root, row.pid, row.started, row.summary = last.root, last.pid, last.started, last.summary
        self.rows[name] = row
        self.lost_now.append(name)
        record: dict[str, Any] = {"name": name, "pid": row.pid, "started": row.started, "ended": row.ended,
                                  "root": row.root, "how": "lost", "by": ""}
        record["summary"] = to_wire(row.summary) if row.summary is not None else {}
        ended.write(name, record)
        self._ended_seen[name] = row.ended or 0.0

    # -- ended crawls -------------------------------------------------------------------
    def _load_ended(self) -> None:
        records = ended.read_all()
        for name, rec in records.items():
            at = float(rec.get("ended") or 0.0)  # (a float: ended.read_all checks each field)
            if name in self.links or self._dismissed.get(name) == at:
                continue
            row = self.rows.get(name)
            if row is not None and not row.live and self._ended_seen.get(name) == at:
                continue
            try:
                summary = from_wire(rec["summary"]) if rec["summary"] else None
            except (KeyError, TypeError, ValueError):
                continue  # not a summary this dashboard can draw: skip the file, as read_all does
            self._ended_seen[name] = at
            how = str(rec.get("how") or "done")
            self.rows[name] = Row(name, root=str(rec.get("root", "")), pid=int(rec.get("pid") or 0),
                                  started=float(rec.get("started") or 0.0), summary=summary,
                                  how=CRASHED.get(how, how), by=str(rec.get("by") or ""), ended=at)
        for name, row in list(self.rows.items()):  # dismissed elsewhere: gone here too
            if not row.live and name not in records and name in self._ended_seen:
                del self.rows[name]

    def dismiss(self, name: str) -> bool:
        """Forget an ended crawl, here and in the run directory; False for a live one. (A
        shared crawl's row is forgotten here only: the crawl stays in Redis.)"""
        row = self.rows.get(name)
        if row is None or row.live:
            return False
        del self.rows[name]
        if row.mode == "redis":
            self._dismissed[name] = 0.0
            return True
        self._dismissed[name] = row.ended or 0.0
        self._ended_seen.pop(name, None)
        ended.dismiss(name)
        return True

    # -- commands -------------------------------------------------------------------------
    def can_command(self, name: str) -> bool:
        """A live crawl this board can send keys to."""
        row = self.rows.get(name)
        if row is None or not row.live:
            return False
        if row.mode == "redis":
            return self._redis is not None
        link = self.links.get(name)
        return link is not None and link.connected

    async def command(self, name: str, op: str, **args: Any) -> Any:
        """Send one of the protocol's commands to a live crawl; RemoteError if it cannot."""
        row = self.rows.get(name)
        if row is not None and row.mode == "redis" and self._redis is not None:
            from redis.exceptions import RedisError

            from .shared import SUFFIX, control

            try:
                await control(self._redis, name.removesuffix(SUFFIX), op, **args)
            except (RedisError, ValueError) as exc:
                raise RemoteError(str(exc)) from None
            return None
        link = self.links.get(name)
        if link is None or not link.connected:
            raise RemoteError(f"{name} is not running")
        result = await link.request(op, **args)
        link.ask()
        return result

    async def close(self) -> None:
        links, self.links = list(self.links.values()), {}
        for link in links:
            await link.close()
        if self._redis is not None:
            redis, self._redis = self._redis, None
            with contextlib.suppress(Exception):
                await redis.aclose()
