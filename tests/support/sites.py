"""Real aiohttp servers on 127.0.0.1 (in the test's loop, or a counting site in its own
process) and the handlers their routes are made of."""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

def html(*hrefs: str, extra: str = "") -> web.Response:
    body = "".join(f'<a href="{h}">{h}</a>\n' for h in hrefs)
    return web.Response(text=f"<html><body>{extra}{body}</body></html>", content_type="text/html")


def page(*hrefs: str, extra: str = "") -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return html(*hrefs, extra=extra)
    return handler


def slow(delay: float, handler: Handler | None = None, text: str = "<p>leaf</p>") -> Handler:
    """A page that answers `delay` seconds late (`handler`'s answer, else `text` as HTML): a
    server that takes its time is the behaviour under test, so this sleep is the server's."""
    async def late(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay)
        if handler is not None:
            return await handler(request)
        return web.Response(text=text, content_type="text/html")
    return late


def held(release: asyncio.Event | None = None, handler: Handler | None = None, text: str = "late") -> Handler:
    """A page that answers (`handler`'s answer, else `text`) only once `release` is set
    (never, without one): a request in flight for exactly as long as the test needs it,
    however loaded the machine."""
    async def wait(request: web.Request) -> web.StreamResponse:
        await (release or asyncio.Event()).wait()
        if handler is not None:
            return await handler(request)
        return web.Response(text=text, content_type="text/html")
    return wait


def slow_site(n: int, delay: float, extra: dict[str, Handler] | None = None) -> dict[str, Handler]:
    """A root linking to n leaves /p0 ... /p{n-1}, each `delay` seconds late."""
    routes = {"/": page(*[f"/p{i}" for i in range(n)])} | {f"/p{i}": slow(delay) for i in range(n)}
    return routes | (extra or {})


def held_site(n: int, release: asyncio.Event) -> dict[str, Handler]:
    """A root linking to n leaves that answer once `release` is set: a crawl that lasts
    exactly until the test is done with it."""
    return {"/": page(*[f"/p{i}" for i in range(n)])} | {f"/p{i}": held(release, text="<p>leaf</p>") for i in range(n)}


def redirect(location: str, status: int = 302) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})
    return handler


class Site:
    """A tiny site: a dict of path -> handler, plus request counters."""

    METHODS = "GET"  # the methods its routes answer ("*": any)

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = routes
        self.hits: dict[str, int] = {}
        self.times: list[tuple[float, str]] = []  # (monotonic time, path) of every request, as it arrived
        self.in_flight = 0
        self.max_in_flight = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path_qs
        self.times.append((time.monotonic(), path))
        self.hits[path] = self.hits.get(path, 0) + 1
        handler = self.routes.get(path) or self.routes.get(request.path)
        if handler is None:
            if request.path == "/robots.txt":
                raise web.HTTPNotFound()
            raise web.HTTPNotFound(text="missing")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await handler(request)
        finally:
            self.in_flight -= 1

    async def start(self, address: str = "127.0.0.1") -> str:
        app = web.Application(handler_args={"access_log": None})
        app.router.add_route(self.METHODS, "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, address, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://{address}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@contextlib.asynccontextmanager
async def serving(cls: type[Site] = Site) -> AsyncIterator[Callable[..., Awaitable[Site]]]:
    """What the `serve` fixtures hand a test: start(routes, address) starts a site of `cls`,
    and every site started is stopped at the end."""
    sites: list[Site] = []

    async def start(routes: dict[str, Handler], address: str = "127.0.0.1") -> Site:
        site = cls(routes)
        await site.start(address)
        sites.append(site)
        return site

    try:
        yield start
    finally:
        for site in sites:
            await site.stop()


# -- a counting site in its own process (the cluster tests): what the server saw ----------

COUNTING_SITE = r"""
import asyncio, json, sys, time
from aiohttp import web
cfg = json.loads(sys.argv[1])
pages, delay, fanout, robots = cfg["pages"], cfg["delay"], cfg.get("fanout", 3), cfg.get("robots")
hits, log, now = {}, [], {"in": 0, "max": 0}
async def handle(request):
    path = request.path
    if path == "/__stats":
        return web.json_response({"hits": hits, "log": log, "max_in_flight": now["max"]})
    start = time.monotonic()
    hits[path] = hits.get(path, 0) + 1
    now["in"] += 1
    now["max"] = max(now["max"], now["in"])
    try:
        if path == "/robots.txt":
            if robots is None:
                raise web.HTTPNotFound()
            return web.Response(text=robots, content_type="text/plain")
        i = int(request.match_info.get("n") or 0)
        if i >= pages:
            raise web.HTTPNotFound()
        await asyncio.sleep(delay)
        links = "".join(f'<a href="/p/{j}">{j}</a>' for j in range(i * fanout + 1, min(pages, i * fanout + fanout + 1)))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
    finally:
        now["in"] -= 1
        log.append([path, start, time.monotonic()])
async def main():
    app = web.Application(handler_args={"access_log": None})
    app.router.add_get("/", handle)
    app.router.add_get("/p/{n}", handle)
    app.router.add_get("/robots.txt", handle)
    app.router.add_get("/__stats", handle)
    runner = web.AppRunner(app, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


class CountingSite:
    """A site of `pages` pages (the root and /p/1 ... /p/pages-1, each linking to the next
    `fanout`) in its own process, `delay` s per page; it counts what it serves."""

    def __init__(self, url: str) -> None:
        self.url = url

    def stats(self) -> dict:
        """hits: path -> requests; log: [path, start, end] (time.monotonic(), the same
        clock as this process's); max_in_flight: most requests served at once."""
        import urllib.request

        with urllib.request.urlopen(self.url + "__stats", timeout=30) as resp:
            return json.loads(resp.read())


@contextlib.contextmanager
def counting_site(pages: int, delay: float = 0.0, *, fanout: int = 3,
                  robots: str | None = None) -> Iterator[CountingSite]:
    import subprocess
    import sys

    cfg = json.dumps({"pages": pages, "delay": delay, "fanout": fanout, "robots": robots})
    proc = subprocess.Popen([sys.executable, "-c", COUNTING_SITE, cfg], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://"), url
        yield CountingSite(url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
