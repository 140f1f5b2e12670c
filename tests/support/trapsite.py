"""A real site with an endless calendar: every month page links the next month, the
same month a year on, and each of its days; day pages link their month back. Beside it,
a finite set of articles. The calendar alone never ends: only an ignore (or a limit)
lets the crawl finish."""
from __future__ import annotations

from aiohttp import web

from support.sites import Site, html

ARTICLES = 40


def month_links(y: int, m: int) -> list[str]:
    ny, nm = (y + 1, 1) if m == 12 else (y, m + 1)
    links = [f"/cal/{ny}/{nm:02d}/", f"/cal/{y + 1}/{m:02d}/"]
    links += [f"/cal/{y}/{m:02d}/{d:02d}/" for d in range(1, 29)]
    return links


async def calendar(request: web.Request) -> web.StreamResponse:
    parts = [p for p in request.path.split("/") if p]
    try:
        y, m = int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        raise web.HTTPNotFound() from None
    if len(parts) == 4:  # a day
        return html(f"/cal/{y}/{m:02d}/")
    return html(*month_links(y, m))


async def article(request: web.Request) -> web.StreamResponse:
    n = int(request.path.strip("/").split("/")[-1])
    return html(*(f"/art/{k}" for k in (n + 1, n + 2) if k < ARTICLES), "/")


def routes() -> dict:
    async def home(request: web.Request) -> web.StreamResponse:
        return html("/art/0", "/cal/2026/01/")

    return {"/": home, **{f"/art/{n}": article for n in range(ARTICLES)}}


class TrapSite(Site):
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/cal/"):
            self.hits[request.path] = self.hits.get(request.path, 0) + 1
            return await calendar(request)
        return await super()._dispatch(request)


async def start_trap() -> TrapSite:
    site = TrapSite(routes())
    await site.start()
    return site


def main() -> None:
    """Serve the trap site in its own process (tests that run the CLI): prints its URL."""
    import asyncio

    async def run() -> None:
        site = await start_trap()
        print(site.url, flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
