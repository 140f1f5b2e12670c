"""Sites whose pages scripts build (for `--browser`): their HTML holds no link at all.

- `docs_site()`: docsify-like. Every page path answers the same shell; its script
  (/docsify.js, shared by every page, with /theme.css) fetches the page's markdown
  (/README.md, /pageN.md) and renders it, links included, with a tiny renderer.
- `spa_site()`: a single-page app with history routes /p/0 ... /p/9. The shell's script
  (/spa.js) fetches the route's JSON (/api/index.json, /api/p/N.json), renders its links
  and adds an <img> for the page (/img/N.png) and a logo shared by every page (/img/logo.png).

Routes are `support.sites.Site` handlers, so the server counts every request it saw.
"""
from __future__ import annotations

import json

from aiohttp import web

from .sites import Handler

DOC_PAGES = 10  # README.md and page1.md ... page9.md
SPA_PAGES = 10  # /p/0 ... /p/9
# a 1x1 transparent PNG
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a5f3b6e40000000049454e44ae426082")

SHELL = """<!doctype html>
<html><head><meta charset="utf-8"><title>loading</title>{head}</head>
<body><main id="app">Loading...</main>{body}</body></html>
"""

# A markdown renderer small enough to read: headings, [links](...), ![images](...), paragraphs.
DOCSIFY_JS = r"""
(function () {
  function esc(s) { return s.replace(/&/g, "&amp;").replace(/</g, "&lt;"); }
  function inline(s) {
    return esc(s)
      .replace(/!\[([^\]]*)\]\(([^)]+)\)/g, '<img alt="$1" src="$2">')
      .replace(/\[([^\]]+)\]\(([^)]+)\)/g, '<a href="$2">$1</a>');
  }
  function render(md) {
    return md.split(/\n\n+/).map(function (block) {
      var h = /^(#{1,6}) (.*)$/.exec(block);
      return h ? "<h" + h[1].length + ">" + inline(h[2]) + "</h" + h[1].length + ">" : "<p>" + inline(block) + "</p>";
    }).join("\n");
  }
  var path = location.pathname === "/" ? "/README" : location.pathname;
  fetch(path + ".md").then(function (r) { return r.text(); }).then(function (md) {
    document.getElementById("app").innerHTML = render(md);
    var h1 = document.querySelector("h1");
    if (h1) document.title = h1.textContent;
  });
})();
"""

SPA_JS = r"""
(function () {
  var app = document.getElementById("app");
  var m = /^\/p\/(\d+)$/.exec(location.pathname);
  var api = m ? "/api/p/" + m[1] + ".json" : "/api/index.json";
  fetch(api).then(function (r) { return r.json(); }).then(function (data) {
    document.title = data.title;
    var html = "<h1>" + data.title + "</h1><nav>";
    data.links.forEach(function (href) { html += '<a href="' + href + '">' + href + "</a> "; });
    app.innerHTML = html + "</nav>";
    var logo = document.createElement("img");
    logo.src = "/img/logo.png";
    app.appendChild(logo);
    if (data.image) {
      var img = document.createElement("img");
      img.src = data.image;
      app.appendChild(img);
    }
  });
})();
"""


def _text(body: str | bytes, content_type: str) -> Handler:
    data = body.encode() if isinstance(body, str) else body

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, content_type=content_type)
    return handler


def doc_markdown(n: int) -> str:
    """Page n's markdown: a tree, so every page is reached only through rendered links."""
    name = "README" if n == 0 else f"page{n}"
    links = [f"[page {c}](/page{c})" for c in (2 * n + 1, 2 * n + 2) if 0 < c < DOC_PAGES]
    return f"# {name}\n\nThis is {name}.\n\n" + " ".join(links or ["[home](/)"]) + "\n"


def docs_site() -> dict[str, Handler]:
    shell = SHELL.format(head='<link rel="stylesheet" href="/theme.css">',
                         body='<script src="/docsify.js"></script>')
    routes: dict[str, Handler] = {
        "/docsify.js": _text(DOCSIFY_JS, "application/javascript"),
        "/theme.css": _text("body { font-family: sans-serif; }", "text/css"),
        "/": _text(shell, "text/html"),
        "/README.md": _text(doc_markdown(0), "text/markdown"),
    }
    for n in range(1, DOC_PAGES):
        routes[f"/page{n}"] = _text(shell, "text/html")  # history mode: every route is the shell
        routes[f"/page{n}.md"] = _text(doc_markdown(n), "text/markdown")
    return routes


def doc_paths() -> list[str]:
    return ["/"] + [f"/page{n}" for n in range(1, DOC_PAGES)]


def spa_site() -> dict[str, Handler]:
    shell = SHELL.format(head="", body='<script src="/spa.js"></script>')
    routes: dict[str, Handler] = {
        "/": _text(shell, "text/html"),
        "/spa.js": _text(SPA_JS, "application/javascript"),
        "/img/logo.png": _text(PNG, "image/png"),
        "/api/index.json": _text(json.dumps({"title": "home", "links": ["/p/0"]}), "application/json"),
    }
    for n in range(SPA_PAGES):
        links = [f"/p/{c}" for c in (2 * n + 1, 2 * n + 2) if c < SPA_PAGES] or ["/"]
        data = {"title": f"page {n}", "links": links, "image": f"/img/{n}.png"}
        routes[f"/p/{n}"] = _text(shell, "text/html")
        routes[f"/api/p/{n}.json"] = _text(json.dumps(data), "application/json")
        routes[f"/img/{n}.png"] = _text(PNG, "image/png")
    return routes


def spa_paths() -> list[str]:
    return ["/"] + [f"/p/{n}" for n in range(SPA_PAGES)]


# Lazy images and an endless list: nothing below the first screen loads until it is scrolled
# to. Images far down whose `src` a script sets once they come into view (an
# IntersectionObserver, as lazy-loading libraries do: headless Chromium loads native
# `loading=lazy` images at once); a list that fetches its next part each time the
# bottom comes into view, LIST_PARTS parts, each with an image.
LIST_PARTS = 3
LAZY_IMAGES = 2
LAZY_JS = r"""
(function () {
  var seen = new IntersectionObserver(function (entries) {
    entries.forEach(function (e) {
      if (e.isIntersecting) { e.target.src = e.target.dataset.src; seen.unobserve(e.target); }
    });
  });
  document.querySelectorAll("img[data-src]").forEach(function (img) { seen.observe(img); });
  var part = 0, busy = false, list = document.getElementById("list");
  function more() {
    if (busy || part >= LIST_PARTS) return;
    busy = true;
    fetch("/list/" + part + ".json").then(function (r) { return r.json(); }).then(function (data) {
      var li = document.createElement("li");
      li.style.height = "800px";
      li.innerHTML = '<img src="' + data.image + '"> ' + data.text;
      list.appendChild(li);
      part += 1;
      busy = false;
    });
  }
  window.addEventListener("scroll", function () {
    if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 10) more();
  });
})();
""".replace("LIST_PARTS", str(LIST_PARTS))


def lazy_site() -> dict[str, Handler]:
    images = "".join(f'<div style="height:3000px"></div><img data-src="/lazy/{n}.png" width="10" height="10">'
                     for n in range(LAZY_IMAGES))
    body = f'{images}<ul id="list"></ul><script src="/list.js"></script>'
    routes: dict[str, Handler] = {
        "/": _text(SHELL.format(head="", body=body), "text/html"),
        "/list.js": _text(LAZY_JS, "application/javascript"),
    }
    for n in range(LAZY_IMAGES):
        routes[f"/lazy/{n}.png"] = _text(PNG, "image/png")
    for n in range(LIST_PARTS):
        routes[f"/list/{n}.json"] = _text(json.dumps({"text": f"part {n}", "image": f"/item/{n}.png"}),
                                          "application/json")
        routes[f"/item/{n}.png"] = _text(PNG, "image/png")
    return routes


def lazy_loads() -> list[str]:
    """What only scrolling makes the page load."""
    return ([f"/lazy/{n}.png" for n in range(LAZY_IMAGES)] + [f"/list/{n}.json" for n in range(LIST_PARTS)]
            + [f"/item/{n}.png" for n in range(LIST_PARTS)])


# A page that does what a crawl must survive: dialogs, a popup, a download, a same-origin
# frame whose link a script makes, and (on /mover) a move to another URL.
RUDE_JS = r"""
alert("hello");
confirm("sure?");
prompt("name?");
window.open("/popped");
var a = document.createElement("a");
a.href = "/file.bin";
a.download = "file.bin";
document.body.appendChild(a);
a.click();
a.remove();
document.body.insertAdjacentHTML("beforeend", '<a href="/after-dialogs">on</a>');
"""
FRAME_JS = 'document.body.insertAdjacentHTML("beforeend", \'<a href="/from-frame">f</a>\');'


def rude_site(elsewhere: str) -> dict[str, Handler]:
    """`elsewhere`: where /mover sends itself (another host's URL)."""
    async def download(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"\0" * 64, content_type="application/octet-stream",
                            headers={"Content-Disposition": 'attachment; filename="file.bin"'})

    mover = f'<script>setTimeout(function () {{ location.href = "{elsewhere}"; }}, 50)</script>'
    return {
        "/": _text(SHELL.format(head="", body='<iframe src="/frame"></iframe><script src="/rude.js"></script>'
                                '<a href="/mover">m</a>'), "text/html"),
        "/rude.js": _text(RUDE_JS, "application/javascript"),
        "/frame": _text(SHELL.format(head="", body=f"<script>{FRAME_JS}</script>"), "text/html"),
        "/popped": _text(SHELL.format(head="", body=""), "text/html"),
        "/file.bin": download,
        "/after-dialogs": _text(SHELL.format(head="", body=""), "text/html"),
        "/from-frame": _text(SHELL.format(head="", body=""), "text/html"),
        "/mover": _text(SHELL.format(head="", body=mover), "text/html"),
    }


# A hash-routed app: one document, its routes in the fragment (`#/a`, `#!b`, `#/c`); the
# script renders the route's JSON, links included. `#section` is a plain in-page fragment.
HASH_JS = r"""
(function () {
  var route = location.hash.replace(/^#!?\/?/, "") || "home";
  fetch("/api/h/" + route + ".json").then(function (r) { return r.json(); }).then(function (data) {
    var html = "<h1 id=\"section\">" + route + "</h1>";
    data.links.forEach(function (href) { html += '<a href="' + href + '">' + href + "</a> "; });
    document.getElementById("app").innerHTML = html;
  });
})();
"""
HASH_LINKS = {"home": ["#/a", "#!b", "#section"], "a": ["#/c", "#section"], "b": ["#/a"], "c": ["/#!b"]}


def hash_site() -> dict[str, Handler]:
    routes: dict[str, Handler] = {"/": _text(SHELL.format(head="", body='<script src="/hash.js"></script>'),
                                             "text/html"),
                                  "/hash.js": _text(HASH_JS, "application/javascript")}
    for name, links in HASH_LINKS.items():
        routes[f"/api/h/{name}.json"] = _text(json.dumps({"links": links}), "application/json")
    return routes


def hash_pages() -> list[str]:
    return ["/", "/#/a", "/#!b", "/#/c"]
