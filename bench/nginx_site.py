"""Generate a deterministic ~20,000-page static site and serve it with Debian's nginx.

    .venv/bin/python bench/nginx_site.py            # generate (if needed) and serve until ^C
    .venv/bin/python bench/nginx_site.py --generate # generate only

Layout (all under bench/_work/site/):

    /                          root index: links to every section (some without the
                               trailing slash, so nginx answers 301) and to the sitemaps
    /sitemap/N.html            4 sitemap pages with ~5,000 links each (index pages with
                               thousands of links)
    /secSS/                    20 sections; each index links to its 20 topics
    /secSS/all.html            every page of the section, ~1,000 links
    /secSS/tTT/                400 topic directories; each index links to its ~48 pages
    /secSS/tTT/pPPP.html       ~19,200 content pages, 5 KB to 200 KB (log-normal, median
                               ~18 KB), each with 10-40 in-text links: relative, ../,
                               root-relative, absolute, fragments, repeats; ~1 in 12
                               links to a topic directory without its slash (301), ~1 in 20
                               pages carries a dead link (404), plus external and mailto:
                               links that no crawler should follow.

The page set, the 301 and 404 URLs are written to bench/_work/site/manifest.json, which
the comparison uses to check what each crawler found. Same seed, same site, byte for byte.
The absolute links carry the port, so the site is regenerated when the port changes.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Nginx, ensure_work  # noqa: E402 (bench/ put on sys.path just above)

DEFAULT_PORT = 8765
SECTIONS = 20
TOPICS = 20
PAGES_PER_TOPIC = 48
SITEMAPS = 4
GEN_VERSION = 4

WORDS = (
    "asyncio crawler worker queue frontier redirect robots scope depth page link anchor "
    "server client session timeout retry backoff jitter header body parser lexbor html "
    "the of and to in is that for it as with on by this be are from at or an which "
    "network latency throughput bandwidth socket connection pool keepalive request response "
    "python coroutine event loop task future await yield generator select epoll kernel"
).split()


def _filler_paragraphs(rng: random.Random, n: int = 400) -> list[str]:
    paras = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 160))]
        # sprinkle inline markup so the parser has real work: em, code, spans
        for j in range(0, len(words), rng.randint(9, 17)):
            w = words[j]
            words[j] = rng.choice((f"<em>{w}</em>", f"<code>{w}</code>", f'<span class="k{j % 7}">{w}</span>', w))
        tag = "h3" if i % 11 == 0 else "p"
        body = " ".join(words if tag == "p" else words[:8])
        paras.append(f"<{tag}>{body}</{tag}>\n")
    return paras


def page_size(rng: random.Random) -> int:
    # log-normal, median ~18 KB, clamped to [5 KB, 200 KB]
    return int(min(200_000, max(5_000, math.exp(rng.gauss(math.log(18_000), 0.85)))))


def _html(title: str, nav: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title}</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "</head>\n<body><header><nav>" + nav + "</nav></header>\n<main>\n"
        f"<h1>{title}</h1>\n" + body + "\n</main><footer><p>generated for crawltop benchmarks</p>"
        "<a href=\"mailto:bench@example.invalid\">mail</a> "
        "<a href=\"https://example.com/elsewhere\">elsewhere</a></footer></body></html>\n"
    )


def generate(site: Path, *, port: int = DEFAULT_PORT, seed: int = 20240501, force: bool = False) -> dict:
    manifest_path = site / "manifest.json"
    key = {"gen": GEN_VERSION, "port": port, "seed": seed, "sections": SECTIONS,
           "topics": TOPICS, "pages_per_topic": PAGES_PER_TOPIC}
    if not force and manifest_path.exists():
        m = json.loads(manifest_path.read_text())
        if m.get("key") == key:
            return m
    t0 = time.perf_counter()
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    rng = random.Random(seed)
    paras = _filler_paragraphs(rng)
    base = f"http://127.0.0.1:{port}"

    pages: list[str] = []           # every content page path
    for s in range(SECTIONS):
        for t in range(TOPICS):
            for p in range(PAGES_PER_TOPIC):
                pages.append(f"/sec{s:02d}/t{t:02d}/p{p:03d}.html")
    html_paths: set[str] = {"/"}
    redirects: set[str] = set()
    dead: set[str] = set()
    total_bytes = 0
    total_links = 0

    def write(path: str, text: str) -> None:
        nonlocal total_bytes
        fs = site / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        fs.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        total_bytes += len(data)
        fs.write_bytes(data)

    # root
    items = []
    for s in range(SECTIONS):
        href = f"/sec{s:02d}" if s % 3 == 0 else f"sec{s:02d}/"
        if s % 3 == 0:
            redirects.add(f"/sec{s:02d}")
        items.append(f'<li><a href="{href}">Section {s}</a></li>')
    items += [f'<li><a href="sitemap/{k}.html">Sitemap {k}</a></li>' for k in range(SITEMAPS)]
    write("/", _html("crawltop bench site", '<a href="/">home</a>',
                     "<ul>" + "\n".join(items) + "</ul>" + "".join(paras[:5])))
    total_links += len(items) + 2

    # sitemaps: ~5,000 links each, all pages split between them
    chunk = math.ceil(len(pages) / SITEMAPS)
    for k in range(SITEMAPS):
        part = pages[k * chunk:(k + 1) * chunk]
        links = [f'<li><a href="{pp}">{pp}</a></li>' for pp in part]
        html_paths.add(f"/sitemap/{k}.html")
        write(f"/sitemap/{k}.html",
              _html(f"Sitemap {k}", '<a href="/">home</a>', "<ul>\n" + "\n".join(links) + "\n</ul>"))
        total_links += len(links) + 3

    for s in range(SECTIONS):
        sp = f"/sec{s:02d}/"
        html_paths.add(sp)
        topics = [f'<li><a href="t{t:02d}/">Topic {t}</a></li>' for t in range(TOPICS)]
        write(sp, _html(f"Section {s}", '<a href="/">home</a> <a href="all.html">all</a>',
                        '<ul>' + "\n".join(topics) + '</ul><p><a href="all.html">All pages</a></p>'
                        + "".join(paras[s:s + 3])))
        total_links += len(topics) + 5
        html_paths.add(sp + "all.html")
        allp = [f'<li><a href="t{t:02d}/p{p:03d}.html">t{t:02d}/p{p:03d}</a></li>'
                for t in range(TOPICS) for p in range(PAGES_PER_TOPIC)]
        write(sp + "all.html", _html(f"Section {s}: all pages", '<a href="/">home</a> <a href="./">section</a>',
                                     "<ol>\n" + "\n".join(allp) + "\n</ol>"))
        total_links += len(allp) + 4
        for t in range(TOPICS):
            tp = f"{sp}t{t:02d}/"
            html_paths.add(tp)
            plist = [f'<li><a href="p{p:03d}.html">Page {p}</a></li>' for p in range(PAGES_PER_TOPIC)]
            write(tp, _html(f"Section {s} topic {t}", '<a href="/">home</a> <a href="../">section</a>',
                            "<ul>" + "\n".join(plist) + "</ul>" + "".join(paras[t:t + 8])))
            total_links += len(plist) + 4
            for p in range(PAGES_PER_TOPIC):
                path = f"{tp}p{p:03d}.html"
                html_paths.add(path)
                size = page_size(rng)
                nlinks = rng.randint(10, 40)
                chunks: list[str] = []
                n = 0
                i = rng.randrange(len(paras))
                links_done = 0
                while n < size:
                    para = paras[i % len(paras)]
                    i += 1
                    if links_done < nlinks and para.startswith("<p>"):
                        k = rng.random()
                        target = rng.choice(pages)
                        ts, tt, tf = target.split("/")[1:]
                        if k < 0.30 and ts == f"sec{s:02d}" and tt == f"t{t:02d}":
                            href = tf
                        elif k < 0.30:
                            href = target
                        elif k < 0.45:
                            href = f"../{tt}/{tf}" if ts == f"sec{s:02d}" else f"../../{ts}/{tt}/{tf}"
                        elif k < 0.60:
                            href = base + target
                        elif k < 0.70:
                            href = f"{target}#s{rng.randint(1, 9)}"
                        elif k < 0.78:
                            href = f"/{ts}/{tt}"          # directory without slash: 301
                            redirects.add(href)
                        elif k < 0.83:
                            href = f"./{tf}" if ts == f"sec{s:02d}" and tt == f"t{t:02d}" else target
                        else:
                            href = target
                        para = para.replace("</p>", f' see <a href="{href}">{tf}</a>.</p>', 1)
                        links_done += 1
                    chunks.append(para)
                    n += len(para)
                extra = ""
                if rng.random() < 1 / 20:
                    d = f"/sec{s:02d}/t{t:02d}/gone-{rng.randrange(600)}.html"
                    dead.add(d)
                    extra = f'<p>A <a href="{d}">dead link</a>.</p>'
                    links_done += 1
                nav = (f'<a href="/">home</a> <a href="../">section {s}</a> <a href="./">topic {t}</a> '
                       f'<a href="p{(p + 1) % PAGES_PER_TOPIC:03d}.html">next</a> '
                       f'<a href="p{(p - 1) % PAGES_PER_TOPIC:03d}.html">prev</a>')
                write(path, _html(f"Page {s}.{t}.{p}", nav, "".join(chunks) + extra))
                total_links += links_done + 7

    manifest = {
        "key": key,
        "html": sorted(html_paths),
        "redirects": sorted(redirects),
        "dead": sorted(dead),
        "bytes": total_bytes,
        "links": total_links,
        "generated_in_s": round(time.perf_counter() - t0, 1),
    }
    manifest_path.write_text(json.dumps(manifest))
    return manifest


def site_dir() -> Path:
    return ensure_work() / "site"


def serve(site: Path, port: int) -> Nginx:
    # Only the generated tree is served; the manifest is not a page of the site.
    return Nginx("site", f"""
        root {site};
        index index.html;
        location = /manifest.json {{ return 404; }}
    """, port=port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--generate", action="store_true", help="generate the site and exit")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    a = ap.parse_args()
    m = generate(site_dir(), port=a.port, force=a.force)
    print(f"site: {len(m['html'])} HTML pages, {len(m['redirects'])} redirecting URLs, "
          f"{len(m['dead'])} dead URLs, {m['bytes'] / 1e6:.0f} MB, {m['links']} links "
          f"(generated in {m['generated_in_s']} s) at {site_dir()}")
    if a.generate:
        return
    with serve(site_dir(), a.port) as ng:
        print(f"serving {ng.base}/ (Ctrl-C to stop)")
        try:
            ng.proc.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
