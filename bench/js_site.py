"""A site that JavaScript builds, for bench/browser.py, served offline on 127.0.0.1.

    .venv/bin/python bench/js_site.py --pages 60 --port 8790

/p/K (K < pages) is an empty shell: its script fetches /data/K.json and writes the title,
three paragraphs, two images and four links to other pages (history routes) itself. /html/K
is the same page written by the server (plain HTML, the same images and links), so the
cost of the browser itself can be measured on one site. Each response waits `--latency`
seconds, as a real server would.
"""
from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

SHELL = (b'<!DOCTYPE html><html><head><meta charset="utf-8"><title>loading</title>'
         b'<script src="/app.js" defer></script></head><body><main id="m"></main></body></html>')
SCRIPT = b"""
(async () => {
  const k = location.pathname.split("/").pop();
  const d = await (await fetch(`/data/${k}.json`)).json();
  const m = document.getElementById("m");
  document.title = d.title;
  m.innerHTML = `<h1>${d.title}</h1>` + d.text.map(t => `<p>${t}</p>`).join("")
    + d.images.map(src => `<img src="${src}" alt="">`).join("")
    + "<ul>" + d.links.map(h => `<li><a href="${h}">${h}</a></li>`).join("") + "</ul>";
})();
"""
PNG = b"\x89PNG\r\n\x1a\n" + bytes(2048)


def links(k: int, pages: int, prefix: str) -> list[str]:
    """Four distinct other pages: every page is reached from /p/0 within a few hops."""
    return [f"{prefix}{(k * 3 + j) % pages}" for j in range(1, 5)]


def data(k: int, pages: int) -> dict[str, object]:
    text = [f"Paragraph {j} of page {k}: " + "words a script wrote " * 20 for j in range(3)]
    return {"title": f"Page {k}", "text": text, "images": [f"/img/{k}-a.png", f"/img/{k}-b.png"],
            "links": links(k, pages, "/p/")}


def plain(k: int, pages: int) -> bytes:
    d = data(k, pages)
    body = "".join(f"<p>{t}</p>" for t in d["text"])  # type: ignore[attr-defined]
    body += "".join(f'<img src="{s}" alt="">' for s in d["images"])  # type: ignore[attr-defined]
    body += "<ul>" + "".join(f'<li><a href="{h}">{h}</a></li>' for h in links(k, pages, "/html/")) + "</ul>"
    head = f"<!DOCTYPE html><html><head><title>Page {k}</title></head>"
    return f"{head}<body><h1>Page {k}</h1>{body}</body></html>".encode()


def make_app(pages: int, latency: float) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        if latency:
            await asyncio.sleep(latency)
        path = request.path
        head, _, tail = path.rpartition("/")
        k = int(tail) if tail.isdigit() and int(tail) < pages else -1
        if head == "/p" and k >= 0:
            return web.Response(body=SHELL, content_type="text/html")
        if head == "/html" and k >= 0:
            return web.Response(body=plain(k, pages), content_type="text/html")
        if path == "/app.js":
            return web.Response(body=SCRIPT, content_type="text/javascript")
        if head == "/data" and tail.endswith(".json") and tail[:-5].isdigit() and int(tail[:-5]) < pages:
            return web.Response(body=json.dumps(data(int(tail[:-5]), pages)).encode(), content_type="application/json")
        if head == "/img" and tail.endswith(".png"):
            return web.Response(body=PNG, content_type="image/png")
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        return web.Response(status=404, text="not found")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--latency", type=float, default=0.02)
    args = ap.parse_args()
    web.run_app(make_app(args.pages, args.latency), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
