"""A site with the traps the ignore sets are for: a wiki whose relative skin
link nests forever (/wiki/skins/skins/...), whose pages link endless old revisions
(?oldid=N links ?oldid=N+1) and histories, reply-to-comment links and a runaway
escape; and an endless calendar (/cal/YYYY/MM/). Its real content is ARTICLES wiki
pages and POSTS blog posts."""
from __future__ import annotations

from aiohttp import web

from support.sites import Site

ARTICLES = 12
POSTS = 6


def _page(*links: str, title: str = "page") -> web.Response:
    body = "".join(f'<a href="{u}">{u}</a>' for u in links)
    return web.Response(text=f"<html><head><title>{title}</title></head><body>{body}</body></html>",
                        content_type="text/html")


async def handle(request: web.Request) -> web.StreamResponse:
    path, q = request.path, request.query
    if path == "/":
        return _page("/wiki/A0", "/cal/2026/01/", "/blog/0/", title="home")
    if path.startswith("/wiki/"):
        if "skins/" in path:  # the loop: a relative link resolved below itself, every time
            return _page("skins/", title="skin")
        name = path.rsplit("/", 1)[-1]
        if "oldid" in q:
            n = int(q["oldid"])
            return _page(f"?oldid={n + 1}", f"?oldid={n}&diff=prev", title=f"{name} rev {n}")
        if "action" in q:
            return _page(f"{path}?oldid=1", title=f"{name} history")
        k = int(name[1:]) if name[1:].isdigit() else 0
        nxt = [f"/wiki/A{k + 1}"] if k + 1 < ARTICLES else []
        return _page(*nxt, "skins/", f"{path}?action=history", f"{path}?oldid=1", f"{path}?action=edit",
                     "/search?q=x%25252525y", title=f"Article {k}")
    if path.startswith("/blog/"):
        n = int(path.strip("/").split("/")[1])
        nxt = [f"/blog/{n + 1}/"] if n + 1 < POSTS else []
        return _page(*nxt, f"/blog/{n}/?replytocom={n * 10 + 1}", f"/blog/{n}/?share=twitter", title=f"Post {n}")
    if path.startswith("/cal/"):
        parts = [p for p in path.split("/") if p]
        y, m = int(parts[1]), int(parts[2])
        ny, nm = (y + 1, 1) if m == 12 else (y, m + 1)
        return _page(f"/cal/{ny}/{nm:02d}/", f"/cal/{y}/{m:02d}/?month={y}-{m:02d}", title=f"{y}-{m:02d}")
    if path == "/search":
        return _page(title="search")
    raise web.HTTPNotFound()


class IgnoreSite(Site):
    """Every request goes to `handle`; hits counted by path and query."""

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path_qs] = self.hits.get(request.path_qs, 0) + 1
        return await handle(request)


async def start_ignore_site() -> IgnoreSite:
    site = IgnoreSite({})
    await site.start()
    return site
