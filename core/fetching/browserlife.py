"""The one Chromium of a `--browser` crawl over its whole life: started, restarted between
pages, launched again after it died, closed.

Apart from the pages (core/fetching/browser.py `BrowserFetcher` is this plus the Fetcher
interface; core/fetching/tab.py one page's tab) because it is a state machine of its own,
whose rules hold whatever a page does:

- The browser is restarted after --browser-restart pages and when its processes' memory
  (PSS, core/fetching/browsermemory.py) passes --browser-memory: new tabs wait while the
  open ones finish (`turn`), so no page is cut by a restart.
- A browser that dies under a page is launched again by the first page to see it die
  (`relaunch`), unless it died MAX_DEATHS times with no page rendered between.
- Each launch has its own profile directory, removed at `close()` (run in the crawl's
  `finally`); a watchdog (core/fetching/reaper.py) ends what is left when crawltop ends any
  other way (SIGKILL).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import UsageError
from ..parsing.urls import keep_routes
from ..secrets import split_proxy
from . import browsermemory
from .chromium import add_cookies, check, executable, first_line, launch
from .pagedone import QUIET
from .reaper import Reaper
from .session import host_key
from .tabturns import Turns

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import BrowserContext, Playwright

    from ..config import CrawlConfig
    from .session import CrawlSession

MAX_DEATHS = 3  # browser deaths in a row (no page rendered between) before pages stop asking for one
PAGE_TIMEOUT = 30.0  # seconds: --page-timeout's default
RESTART_PAGES = 100  # --browser-restart's default: pages one browser renders
MEMORY = 1 << 30  # --browser-memory's default: the browser's PSS before it is restarted
MEMORY_EVERY = 1.0  # seconds between two reads of the browser's memory (a walk of /proc)


class BrowserLife:
    """One Chromium at a time, with its profile and its counters (the monitors read `memory`,
    `restarts`, `relaunches`); pages take a `turn`, and end it with `turned`."""

    def __init__(self, *, path: str | None, timeout: float, max_bytes: int, user_agent: str,
                 config: CrawlConfig | None = None, session: CrawlSession | None = None) -> None:
        self.session = session
        self.path, self.timeout, self.max_bytes, self.agent = path, timeout, max_bytes, user_agent
        # a tab's one hard limit, everything it does included
        self.limit = config.page_timeout if config is not None else PAGE_TIMEOUT
        # seconds of (almost) no traffic: the page is idle
        self.quiet = config.browser_quiet if config is not None else QUIET
        self.restart_pages = config.browser_restart if config is not None else RESTART_PAGES
        # --proxy for the browser's own requests too (loopback included), its user and
        # password answered to the proxy's challenge by each tab (core/fetching/devtools.py)
        self.proxy: str | None = None
        self.proxy_login: tuple[str, str] | None = None
        if config is not None and config.proxy:
            self.proxy, self.proxy_login = _proxy(config.proxy)
        self.env_proxy = config.env_proxy if config is not None else False
        # each tab request's turn on its host (core/fetching/tabturns.py); the attempt
        # gives it the crawl's scheduler
        self.turns = Turns(config.max_wait if config is not None else 60.0,
                           config.page_timeout if config is not None else 60.0)
        self.memory_limit = config.browser_memory if config is not None else MEMORY
        self.restarts = 0  # restarts asked for (pages, memory), not relaunches after a death
        self.relaunches = 0  # new browsers after one died
        self._deaths = 0  # deaths since a page was last rendered: a browser that cannot live is given up
        self.memory = 0  # bytes: the browser's PSS when last read
        self._rendered = 0  # pages since this browser started
        self._open = 0  # tabs open now
        self._due: str | None = None  # why a restart is due: new tabs wait for the open ones
        self._restarting = False
        self._turns = asyncio.Condition()
        self._memory_read = 0.0
        self._reading: asyncio.Future[int] | None = None  # a read of the memory under way
        self._pw: Playwright | None = None
        self._reaper: Reaper | None = None  # kills what is left of the browsers when crawltop ends
        self.context: BrowserContext | None = None  # None: no browser now (dead, or between two)
        # profile directories, removed at close: a dead browser's children may write to its
        # own for a moment after it died, so it is not removed when the next one starts
        self._profiles: list[str] = []
        self.profiles: list[str] = []  # every one this crawl made (its tests check none is left)
        self._lock = asyncio.Lock()
        self._generation = 0  # which launch: a page that saw its browser die relaunches only that one
        self.gone: str | None = None  # why no browser is left
        self._closing = False

    async def start(self) -> None:
        """Launch Chromium; a missing extra or browser is a UsageError (exit 2)."""
        exe = check(self.path)
        from playwright.async_api import async_playwright

        if os.path.isdir("/proc"):  # the watchdog finds Chromium's processes there
            self._reaper = Reaper()
        self._pw = await async_playwright().start()
        keep_routes(True)  # `#/path` and `#!path` are pages of their own in a browser crawl
        try:
            await self._launch(exe)
        except Exception as exc:
            await self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"--browser: Chromium {exe} did not start: {first}") from None

    async def _launch(self, exe: str | None = None) -> None:
        assert self._pw is not None
        profile = tempfile.mkdtemp(prefix="crawltop-chromium-")
        if self._reaper is not None:
            self._reaper.watch(profile)
        self._profiles.append(profile)
        self.profiles.append(profile)
        generation = self._generation
        context = await launch(self._pw, exe or executable(self.path), profile, self.agent,
                               lambda: self._died(generation), proxy=self.proxy, env_proxy=self.env_proxy)
        await add_cookies(context, self.session)
        self.context = context

    def credentials(self, url: str) -> list[tuple[str, str]]:
        """--header's Authorization and Cookie for this URL: only its roots' hosts (or
        --header-host's) get them, as on aiohttp (core/fetching/session.py)."""
        session = self.session
        if session is None or not session.credentials:
            return []
        try:
            host = urlsplit(url).hostname
        except ValueError:
            return []
        return session.credentials if host_key(host) in session.credential_hosts else []

    def _died(self, generation: int) -> None:
        if not self._closing and generation == self._generation:
            self.context = None

    async def close(self) -> None:
        """Close the browser and remove its profile; bounded, so a stuck Chromium cannot
        hold the crawl's end (stopping Playwright's driver then kills it)."""
        self._closing = True
        keep_routes(False)
        context, self.context = self.context, None
        try:
            if context is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(context.close(), 10)
        finally:
            pw, self._pw = self._pw, None
            if pw is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pw.stop(), 10)
            while self._profiles:
                shutil.rmtree(self._profiles.pop(), ignore_errors=True)
            reaper, self._reaper = self._reaper, None
            if reaper is not None:  # its pass ends what a close left (milliseconds when nothing is); waited for
                await asyncio.to_thread(reaper.close)  # (seconds, after a kill: the loop goes on)

    async def relaunch(self, generation: int) -> None:
        """The first page to see a launch die starts the next one; a browser that dies
        MAX_DEATHS times with no page rendered between is given up (pages fail with why)."""
        async with self._lock:
            if generation != self._generation or self.gone is not None:
                return
            self._generation += 1
            self._deaths += 1
            if self._deaths >= MAX_DEATHS:
                self.gone = f"browser: the browser died {self._deaths} times in a row: no page can be rendered"
                return
            self.relaunches += 1
            try:
                await self._launch()
            except Exception as exc:
                self.gone = f"browser: the browser died and did not start again: {first_line(exc)}"

    @property
    def generation(self) -> int:
        """Which launch is running: `relaunch` starts a new one only for the launch it was given."""
        return self._generation

    def lived(self) -> None:
        """A page was rendered: the deaths before it no longer count toward giving up."""
        self._deaths = 0

    async def turn(self) -> None:
        """Wait while a restart is due and tabs are open; the last to see them closed restarts.
        A read of the memory under way is waited for first (milliseconds): it may make one due."""
        reading = self._reading
        if reading is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(reading)
        async with self._turns:
            while self._due is not None or self._restarting:
                if self._open == 0 and not self._restarting:
                    self._restarting = True
                    break
                await self._turns.wait()
            else:
                self._open += 1
                return
        try:
            await self._restart()
        finally:
            async with self._turns:
                self._restarting, self._due = False, None
                self._open += 1
                self._turns.notify_all()

    async def turned(self) -> None:
        """A page's tab closed: one page more for this browser, and maybe a restart due."""
        async with self._turns:
            self._open -= 1
            self._rendered += 1
            self._check()
            self._turns.notify_all()

    def _check(self) -> None:
        """Is a restart due: enough pages, or too much memory? The memory is read at most once
        a second, in a thread: a walk of /proc costs milliseconds per hundred processes."""
        if self._due is not None:
            return
        if self.restart_pages and self._rendered >= self.restart_pages:
            self._due = "pages"
            return
        now = asyncio.get_running_loop().time()
        if self.memory_limit and self._profiles and self._reading is None and now - self._memory_read >= MEMORY_EVERY:
            self._memory_read = now
            reading = self._reading = asyncio.ensure_future(asyncio.to_thread(_memory, self._profiles[-1]))
            reading.add_done_callback(self._measured)

    def _measured(self, reading: asyncio.Future[int]) -> None:
        self._reading = None
        if reading.cancelled() or reading.exception() is not None:
            return
        self.memory = reading.result()
        if self.memory > self.memory_limit and self._due is None:
            self._due = "memory"

    async def _restart(self) -> None:
        """A new browser for the next pages; no tab is open. Its profile goes with it."""
        async with self._lock:
            if self.gone is not None:
                return
            self._generation += 1  # the old one's close is no death
            old, self.context = self.context, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(old.close(), 10)
            while len(self._profiles) > 1 or (old is not None and self._profiles):
                shutil.rmtree(self._profiles.pop(0), ignore_errors=True)
            self.restarts += 1
            self._rendered, self.memory, self._memory_read = 0, 0, 0.0
            try:
                await self._launch()
            except Exception as exc:
                self.gone = f"browser: restarted, and did not start again: {first_line(exc)}"

    async def dead(self, context: BrowserContext) -> bool:
        """Did the browser die (not only a tab fail)? A call fails as soon as the process is
        gone, a moment before the context's close event says so: wait for it, briefly."""
        for _ in range(20):
            if self.context is not context:
                return True
            await asyncio.sleep(0.025)
        return False


def _proxy(url: str) -> tuple[str, tuple[str, str] | None]:
    """--proxy's URL without credentials, and its user and password if it has them."""
    bare, user, password = split_proxy(url)
    return bare, (user, password or "") if user is not None else None


def _memory(profile: str) -> int:
    return browsermemory.pss(browsermemory.processes(profile))
