"""The demo's section that JavaScript builds, under /app/: what `crawltop demo --browser` adds.

Every page under /app/ is the same empty shell; its script reads the path, fetches the page's
JSON and writes the title, the text, a photo and the links itself, with history routes
(/app/story/3). Without a browser a crawl sees the shell and its script, and nothing else: no
link of the main site points here, so the plain demo's counts are untouched.
"""
from __future__ import annotations

import json

STORIES = 12
SHELL = (b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>crawltop demo app</title>'
         b'<script src="/app/app.js" defer></script></head>\n'
         b'<body><main id="app">Loading\xe2\x80\xa6</main></body></html>\n')
SCRIPT = b"""
async function show() {
  const path = location.pathname;
  const m = path.match(/^\\/app\\/story\\/(\\d+)$/);
  const data = await (await fetch(m ? `/app/data/story-${m[1]}.json` : "/app/data/index.json")).json();
  const main = document.getElementById("app");
  main.textContent = "";
  const h1 = document.createElement("h1");
  h1.textContent = data.title;
  main.append(h1);
  if (data.photo) {
    const img = document.createElement("img");
    img.src = data.photo;
    img.alt = "";
    main.append(img);
  }
  const p = document.createElement("p");
  p.textContent = data.text;
  main.append(p);
  const ul = document.createElement("ul");
  for (const [href, text] of data.links) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    const li = document.createElement("li");
    li.append(a);
    ul.append(li);
  }
  main.append(ul);
  document.title = data.title;
}
show();
"""
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(48)


def pages() -> list[str]:
    """The paths a browser finds here (the shells), in the order a crawl from /app/ meets them."""
    return ["/app/", *(f"/app/story/{k}" for k in range(STORIES))]


def loads(path: str) -> list[str]:
    """What a browser loads to show the page at `path` (besides the shell itself)."""
    story = path.removeprefix("/app/story/")
    data = "/app/data/index.json" if path == "/app/" else f"/app/data/story-{story}.json"
    return ["/app/app.js", data] + ([] if path == "/app/" else [f"/app/img/story-{story}.png"])


def _data(name: str) -> dict[str, object] | None:
    if name == "index":
        links = [[f"/app/story/{k}", f"Story {k}"] for k in range(STORIES)]
        return {"title": "The demo app", "text": "Every word here was written by a script.", "links": links}
    if name.startswith("story-") and name[6:].isdigit() and int(name[6:]) < STORIES:
        k = int(name[6:])
        links = [["/app/", "All stories"], *([[f"/app/story/{k + 1}", "Next"]] if k + 1 < STORIES else [])]
        return {"title": f"Story {k}", "text": f"Story {k}, rendered in the browser.",
                "photo": f"/app/img/story-{k}.png", "links": links}
    return None


def reply(path: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for a path under /app/."""
    if path in pages():
        return 200, "text/html; charset=utf-8", SHELL
    if path == "/app/app.js":
        return 200, "text/javascript", SCRIPT
    if path.startswith("/app/data/") and path.endswith(".json"):
        data = _data(path.removeprefix("/app/data/").removesuffix(".json"))
        if data is not None:
            return 200, "application/json", json.dumps(data).encode()
    if path.startswith("/app/img/story-") and path.endswith(".png"):
        k = path.removeprefix("/app/img/story-").removesuffix(".png")
        if k.isdigit() and int(k) < STORIES:
            return 200, "image/png", _PNG
    return 404, "text/html", b"<html><body>404 Not Found</body></html>"
