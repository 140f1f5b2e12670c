"""`--browser`: pages that scripts build, crawled in Debian's headless Chromium through
Playwright (core/fetching/browser.py), against real aiohttp sites on 127.0.0.1.

Without Playwright or a Chromium these skip with the reason; in CI (CI set) they must run.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from support.crawl import ListSink, crawl
from support.sites import html, page, redirect
from support.spasite import (
    doc_paths,
    docs_site,
    hash_pages,
    hash_site,
    lazy_loads,
    lazy_site,
    rude_site,
    spa_paths,
    spa_site,
)
from warcio.archiveiterator import ArchiveIterator

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.errors import UsageError
from crawltop.core.fetching.browser import executable
from crawltop.core.output.warc import WarcSink
from crawltop.core.parsing.urls import canonical

QUIET = 0.2  # seconds of quiet network that make a page idle (2 s by default): these sites are local
BROWSER: dict[str, Any] = {"browser": True, "browser_quiet": QUIET}
pytestmark = pytest.mark.chromium  # skipped without Chromium, failed with CI set (tests/conftest.py)


def _missing() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install 'crawltop[browser]'; make test installs it)"
    if executable(None) is None:
        return "no Chromium (apt-get install chromium; .ci/run does it)"
    return None


@pytest.fixture(autouse=True)
def chromium() -> None:
    why = _missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def chromium_left() -> list[str]:
    """Live (not zombie) Chromium processes descended from this one (by their executable: the
    crawl's watchdog names Chromium's folders in its command line, and is no Chromium)."""
    parent: dict[int, int] = {}
    info: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parent[int(entry)] = int(fields[1])
        info[int(entry)] = (fields[0], cmd)
    me, out = os.getpid(), []
    for pid, (state, cmd) in info.items():
        p, hops = pid, 0
        while p in parent and p not in (0, 1, me) and hops < 64:
            p, hops = parent[p], hops + 1
        if p == me and pid != me and state != "Z" and "chrom" in os.path.basename(cmd.split(" ", 1)[0]):
            out.append(f"{pid} {cmd[:80]}")
    return out


def warc_responses(base: Path) -> dict[str, int]:
    """URL -> status of every response record in the series' files."""
    out: dict[str, int] = {}
    for path in sorted(base.parent.glob(base.name.replace(".warc.gz", "-*.warc.gz"))):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    out[rec.rec_headers.get_header("WARC-Target-URI")] = int(rec.http_headers.get_statuscode())
    return out


async def crawl_warc(root: str, warc: Path, **options: object) -> tuple[Crawler, ListSink]:
    options.setdefault("backoff", 0.01)
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(root,), **options), sinks=[sink, WarcSink(str(warc))])  # type: ignore[arg-type]
    await asyncio.wait_for(crawler.crawl(), 90)
    return crawler, sink


@pytest.mark.parametrize("site_of,paths,made", [
    (spa_site, spa_paths, ["/spa.js", "/api/index.json", "/img/logo.png"]
     + [f"/api/p/{n}.json" for n in range(10)] + [f"/img/{n}.png" for n in range(10)]),
    (docs_site, doc_paths, ["/docsify.js", "/theme.css", "/README.md"] + [f"/page{n}.md" for n in range(1, 10)]),
], ids=["spa", "docsify"])
async def test_pages_scripts_build_are_crawled_whole_and_each_url_fetched_once(serve, tmp_path, site_of, paths, made):
    site = await serve(site_of())
    base = site.url
    warc = tmp_path / "crawl.warc.gz"
    crawler, sink = await crawl_warc(base + "/", warc, **BROWSER, requisites=True, concurrency=4, timeout=5.0)
    by = sink.by_url()
    pages = {r.url for r in sink.records if r.kind == "page"}
    assert pages == {base + p for p in paths()}  # every page: found only through links scripts made
    for p in paths():
        assert by[base + p].status == 200 and by[base + p].error is None, by[base + p]
    for p in made:  # what the pages loaded: one requisite Record each, from the browser's answer
        r = by[base + p]
        assert r.status == 200 and r.kind == "requisite" and r.via is not None, r
    if site_of is spa_site:  # the images the script added, as requisites of their page
        for n in range(10):
            r = by[f"{base}/img/{n}.png"]
            assert r.discovery.endswith("I") and r.via == f"{base}/p/{n}", r
    assert len(sink.records) == len(by)  # one Record per URL
    hits = {p: n for p, n in site.hits.items() if p != "/robots.txt"}
    assert hits == dict.fromkeys([*paths(), *made], 1)  # the server saw one request per URL
    archived = warc_responses(warc)
    assert {u: s for u, s in archived.items() if not u.endswith("/robots.txt")} == {
        base + p: 200 for p in [*paths(), *made]}
    assert chromium_left() == []  # no Chromium outlives the crawl
    made = crawler._browser.profiles if crawler._browser is not None else []
    assert made and not [p for p in made if os.path.exists(p)]  # nor its profile


@pytest.mark.parametrize("site_of", [spa_site, docs_site], ids=["spa", "docsify"])
async def test_without_the_browser_only_the_root_is_found(serve, site_of):
    site = await serve(site_of())
    _, sink = await crawl(site.url + "/", requisites=True)
    assert [r.url for r in sink.records if r.kind == "page"] == [site.url + "/"]


async def test_the_browsers_requests_pass_the_crawls_rules(serve):
    """--exclude: the script's images are aborted in the browser, never requested nor recorded."""
    site = await serve(spa_site())
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, exclude=(r"\.png$",), concurrency=4)
    assert not [r for r in sink.records if r.url.endswith(".png")]
    assert not [p for p in site.hits if p.endswith(".png")]
    assert {r.url for r in sink.records if r.kind == "page"} == {site.url + p for p in spa_paths()}


async def test_a_page_that_is_no_html_or_a_redirect_is_an_ordinary_record_of_one_request(serve):
    async def text(request: web.Request) -> web.StreamResponse:
        return web.Response(text="plain", content_type="text/plain")

    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=301, headers={"Location": "/new"})

    site = await serve({"/": page("/notes.txt", "/old"), "/notes.txt": text, "/old": moved, "/new": page()})
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True)
    by = sink.by_url()
    notes = by[site.url + "/notes.txt"]
    assert notes.status == 200 and (notes.content_type or "").startswith("text/plain")
    assert by[site.url + "/old"].status == 301 and by[site.url + "/old"].next_url == site.url + "/new"
    assert by[site.url + "/new"].status == 200
    assert {p: n for p, n in site.hits.items() if p != "/robots.txt"} == {"/": 1, "/notes.txt": 1, "/old": 1, "/new": 1}


async def test_a_hung_tab_is_retried_and_its_next_try_is_rendered(serve):
    """An image that never answers holds the page's `load`: --page-timeout ends the tab and the
    page is tried again; the image, seen and failed, is not asked for again, so the second try
    loads. The image says why it has no answer, and the crawl goes on. The bound on the whole
    crawl is generous: on a loaded 2-core machine Chromium's start and the other pages take
    seconds of their own, but a tab not ended by its limit would take 60."""
    never = asyncio.Event()  # set at the end: the image's request is held, not slept on

    async def hold(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(text="late")

    site = await serve({"/": page("/hang", "/ok"), "/hang": lambda r: _now(html(extra='<img src="/never.png">')),
                        "/never.png": hold, "/ok": page()})
    started = time.monotonic()
    try:
        _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, page_timeout=2.0, backoff=0.01)
    finally:
        never.set()
    assert time.monotonic() - started < 40
    by = sink.by_url()
    hung = by[site.url + "/hang"]
    assert hung.status == 200 and hung.error is None and hung.tries == 2, hung
    assert site.hits["/hang"] == 2  # each try asks the server for the page
    assert by[site.url + "/never.png"].error, by[site.url + "/never.png"]
    assert len(sink.records) == len(by)  # one Record each, the image's carried to the page's last try
    assert by[site.url + "/ok"].status == 200 and by[site.url + "/ok"].error is None
    assert site.hits["/never.png"] == 1, site.hits
    assert chromium_left() == []


async def test_a_page_whose_script_never_yields_times_out_and_the_crawl_goes_on(serve):
    """A script that spins forever blocks the tab's renderer (no `load`, no answer to any
    call): the hard limit ends it, the tab is closed, the next page is rendered."""
    site = await serve({"/": page("/spin", "/ok"), "/spin": page(extra="<script>for (;;) {}</script>"),
                        "/ok": page()})
    started = time.monotonic()
    _, sink = await crawl(site.url + "/", **BROWSER, page_timeout=2.0, concurrency=1, max_tries=2, backoff=0.01)
    assert time.monotonic() - started < 40  # generous, as above: without the limit it never ends
    by = sink.by_url()
    spin = by[site.url + "/spin"]
    assert spin.error_kind == "timeout" and (spin.error or "").startswith("browser: page timed out"), spin
    assert spin.tries == 2 and site.hits["/spin"] == 2, spin  # retried, then recorded
    assert by[site.url + "/ok"].status == 200 and by[site.url + "/ok"].error is None
    assert chromium_left() == []


async def _now(resp: web.StreamResponse) -> web.StreamResponse:
    return resp


async def test_a_missing_chromium_is_a_usage_error_before_any_request(serve, tmp_path):
    site = await serve({"/": page()})
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), **BROWSER, browser_path=str(tmp_path / "none")))
    with pytest.raises(UsageError, match="not an executable"):
        await crawler.crawl()
    assert site.hits == {}


def test_the_command_line_says_what_to_install(tmp_path):
    """No Playwright: exit 2, one line naming the pip extra (checked as options are read)."""
    code = ("import sys; sys.modules['playwright'] = None; sys.argv = ['crawltop', 'crawl', "
            "'http://127.0.0.1:9/', '--headless', '--browser']; from crawltop.cli.main import main; "
            "sys.exit(main())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'crawltop[browser]'" in lines[0], done.stderr


def kill_chromium() -> int:
    """SIGKILL the browser process of this test's crawl (Chromium's first process)."""
    for line in chromium_left():
        pid, cmd = line.split(" ", 1)
        if "--type=" not in cmd and "crashpad" not in cmd:
            os.kill(int(pid), 9)
            return int(pid)
    raise AssertionError("no Chromium to kill")


class KillingSink(ListSink):
    """Kills the browser as the Records of the given pages are written."""

    def __init__(self, urls: set[str]) -> None:
        super().__init__()
        self.urls, self.killed = urls, 0

    def write(self, record) -> None:  # type: ignore[no-untyped-def]
        super().write(record)
        if record.url in self.urls:
            kill_chromium()
            self.killed += 1


async def test_a_browser_that_dies_is_replaced_and_its_page_tried_again(serve):
    """Killed twice: each time the page that finds it dead fails with `browser: restarted`, a
    new browser is launched, and the page's next try renders it: nothing is lost."""
    site = await serve({"/": page("/1"), "/1": page("/2"), "/2": page("/3"), "/3": page()})
    base = site.url
    sink = KillingSink({base + "/", base + "/1"})
    crawler = Crawler(CrawlConfig(roots=(base + "/",), **BROWSER, concurrency=1, backoff=0.01, timeout=5.0),
                      sinks=[sink])
    await asyncio.wait_for(crawler.crawl(), 90)
    assert sink.killed == 2
    assert crawler._browser is not None and crawler._browser.relaunches == 2
    assert [r.url for r in sink.records] == [base + p for p in ("/", "/1", "/2", "/3")]
    assert all(r.error is None and r.status == 200 for r in sink.records), sink.records
    assert [r.tries for r in sink.records] == [1, 2, 2, 1]  # the page after each death: one more try
    assert chromium_left() == []


async def test_a_tab_that_crashes_is_retried_then_recorded_and_the_crawl_goes_on(serve, monkeypatch):
    """A script that fills a tiny JS heap crashes its renderer: the tab ends at once (not at
    --page-timeout), the page is tried --max-tries times, each in a new tab, and its Record
    says `browser: tab crashed`; the other pages are rendered."""
    monkeypatch.setenv("CRAWLTOP_CHROMIUM_FLAGS", "--js-flags=--max-old-space-size=16")
    hog = "<script>const a = []; for (;;) a.push(new Array(100000).fill(1));</script>"
    site = await serve({"/": page("/crash", "/ok"), "/crash": page(extra=hog), "/ok": page("/ok2"),
                        "/ok2": page()})
    started = time.monotonic()
    _, sink = await crawl(site.url + "/", **BROWSER, concurrency=1, max_tries=2, backoff=0.01, page_timeout=30.0)
    assert time.monotonic() - started < 25  # two crashes at 30 s each would take 60
    by = sink.by_url()
    crash = by[site.url + "/crash"]
    assert crash.status == 200 and crash.error == "browser: tab crashed" and crash.tries == 2, crash
    assert site.hits["/crash"] == 2
    for path in ("/ok", "/ok2"):
        assert by[site.url + path].status == 200 and by[site.url + path].error is None, by[site.url + path]
    assert chromium_left() == []


async def test_a_stop_while_a_tab_loads_leaves_each_seen_url_one_record(serve):
    """The tab claimed the image (seen, so never fetched again): stopped before the page's
    Record, the image still gets its one Record, cancelled, as the page does."""
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(body=b"x", content_type="image/png")

    site = await serve({"/": page(extra='<img src="/slow.png">'), "/slow.png": slow})
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), **BROWSER, requisites=True, timeout=10.0), sinks=[sink])
    task = asyncio.ensure_future(crawler.crawl())
    for _ in range(600):
        if "/slow.png" in site.hits:
            break
        await asyncio.sleep(0.05)
    crawler.stop()
    await asyncio.wait_for(task, 60)
    urls = [r.url for r in sink.records]
    assert sorted(urls) == [site.url + "/", site.url + "/slow.png"], urls  # exactly one each
    assert all(crawler.frontier.seen(u) for u in urls)
    assert all(r.error_kind == "cancelled" for r in sink.records), sink.records
    assert chromium_left() == []


async def test_a_failed_load_is_not_served_to_later_tabs(serve):
    """The script's first answer is a 503: the next page asks for it again, gets it, and
    finds the links it builds."""
    calls = [0]

    async def script(request: web.Request) -> web.StreamResponse:
        calls[0] += 1
        if calls[0] == 1:
            return web.Response(status=503, text="busy")
        return web.Response(text='document.body.insertAdjacentHTML("beforeend", \'<a href="/built">b</a>\')',
                            content_type="application/javascript")

    tag = '<script src="/app.js" defer></script>'
    site = await serve({"/": page("/a", extra=tag), "/a": page(extra=tag), "/app.js": script, "/built": page()})
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, concurrency=1, timeout=5.0)
    by = sink.by_url()
    assert by[site.url + "/app.js"].status == 503  # its one Record: the answer its claim got
    assert by[site.url + "/built"].status == 200, sink.records  # found by the second tab's script
    assert calls[0] >= 2


async def test_redirects_a_tab_follows_pass_the_crawls_rules(serve):
    """Chromium follows a redirect and its target is paused again before it leaves: each hop
    passes the crawl's rules, so one into --exclude or robots.txt's Disallow is never
    requested; an allowed one is the first's redirect, recorded once."""
    robots = web.Response(text="User-agent: *\nDisallow: /secret/\n", content_type="text/plain")
    img = web.Response(body=b"\x89PNG", content_type="image/png")
    site = await serve({
        "/robots.txt": lambda r: _now(robots),
        "/": page(extra='<img src="/r1.png"><img src="/r2.png"><img src="/r3.png">'),
        "/r1.png": redirect("/private/x.png"), "/r2.png": redirect("/secret/y.png"), "/r3.png": redirect("/ok.png"),
        "/private/x.png": lambda r: _now(img), "/secret/y.png": lambda r: _now(img), "/ok.png": lambda r: _now(img),
    })
    base = site.url
    _, sink = await crawl(base + "/", **BROWSER, requisites=True, exclude=("/private/",), timeout=5.0)
    by = sink.by_url()
    assert "/private/x.png" not in site.hits and "/secret/y.png" not in site.hits, site.hits
    for p in ("/private/x.png", "/secret/y.png"):
        assert p not in by or by[base + p].status is None, by[base + p]
    for p in ("/r1.png", "/r2.png", "/r3.png"):
        assert by[base + p].status == 302 and site.hits[p] == 1, by[base + p]
    ok = by[base + "/ok.png"]
    assert ok.status == 200 and ok.discovery.endswith("R") and ok.via == base + "/r3.png", ok
    assert site.hits["/ok.png"] == 1
    assert len(sink.records) == len(by)


async def test_what_loads_only_on_scroll_is_recorded_and_the_record_counts_the_tabs_requests(serve, tmp_path):
    """Lazy images far down and an endless list load only as the tab scrolls to the bottom
    (core/fetching/pagedone.py): each is recorded once, a requisite of the page, archived,
    and the page's Record counts what its tab asked for, what failed and the bytes it was handed."""
    site = await serve(lazy_site())
    base = site.url
    warc = tmp_path / "lazy.warc.gz"
    _, sink = await crawl_warc(base + "/", warc, **BROWSER, requisites=True)
    by = sink.by_url()
    for p in [*lazy_loads(), "/list.js"]:
        r = by[base + p]
        assert r.status == 200 and r.kind == "requisite" and r.via == base + "/", r
        assert site.hits[p] == 1
    home = by[base + "/"]
    assert home.error is None and home.browser is not None, home
    body = sum(by[base + p].size for p in [*lazy_loads(), "/list.js"]) + home.size
    assert home.browser == {"requests": len(lazy_loads()) + 2, "failed": 0, "bytes": body}, home.browser
    archived = warc_responses(warc)
    assert all(archived[base + p] == 200 for p in ["/", "/list.js", *lazy_loads()]), archived


async def test_dialogs_popups_downloads_frames_and_a_page_that_moves_itself(serve):
    """alert/confirm/prompt are dismissed (the script goes on to make its link); a popup is
    blocked, its request never sent; a download is not saved, its URL becomes a link of the
    page, fetched as any link; a same-origin frame's script-made link is followed; a page that
    sets `location` to another host is recorded as a redirect there, not followed."""
    other = await serve({"/elsewhere": page()}, "127.0.0.2")
    site = await serve(rude_site(other.url + "/elsewhere"))
    base = site.url
    _, sink = await crawl(base + "/", **BROWSER, requisites=True)
    by = sink.by_url()
    assert by[base + "/after-dialogs"].status == 200  # made by the script after its three dialogs
    assert "/popped" not in site.hits and base + "/popped" not in by
    # the download manager's request is paused as the page's and failed there; the crawl
    # fetches the URL as a link of the page: its one Record, the server's one request
    download = by[base + "/file.bin"]
    assert download.status == 200 and download.via == base + "/" and site.hits["/file.bin"] == 1, download
    assert by[base + "/"].next_url is None  # a download is no move of the page
    frame = by[base + "/frame"]
    assert frame.status == 200 and frame.discovery.endswith("E") and site.hits["/frame"] == 1, frame
    assert by[base + "/from-frame"].status == 200 and by[base + "/from-frame"].via == base + "/"
    mover = by[base + "/mover"]
    assert mover.status == 200 and mover.next_url == other.url + "/elsewhere" and mover.error is None, mover
    assert other.hits == {} and other.url + "/elsewhere" not in by  # out of scope: not followed
    assert chromium_left() == []


async def test_credentials_reach_only_the_roots_host_in_the_tabs_requests_too(serve, tmp_path):
    """--header's Authorization and Cookie go with the tab's requests to the root's host and
    never to a second host the page loads from (counted at both servers); a --cookies cookie
    goes by its domain, the root's, merged into the one Cookie header."""
    seen: dict[str, list[tuple[str | None, str | None]]] = {"root": [], "other": []}

    def counting(name: str, body: bytes, kind: str):  # type: ignore[no-untyped-def]
        async def handler(request: web.Request) -> web.StreamResponse:
            seen[name].append((request.headers.get("Authorization"), request.headers.get("Cookie")))
            return web.Response(body=body, content_type=kind)
        return handler

    script = b'fetch("/data.json"); fetch(document.getElementById("x").dataset.other + "/o.json");'
    other = await serve({"/o.png": counting("other", b"png", "image/png"),
                         "/o.json": counting("other", b"{}", "application/json"),
                         "/o.js": counting("other", b"1", "application/javascript")}, "127.0.0.2")
    tag = (f'<img src="{other.url}/o.png"><script src="{other.url}/o.js"></script>'
           f'<span id="x" data-other="{other.url}"></span><script src="/app.js"></script>')
    site = await serve({"/": page(extra=tag), "/app.js": counting("root", script, "application/javascript"),
                        "/data.json": counting("root", b"{}", "application/json")})
    jar = tmp_path / "cookies.txt"
    jar.write_text("# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tjar\tj1\n")
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, cookies=str(jar),
                          headers=("Authorization: Bearer s3cret", "Cookie: sid=abc"))
    assert len(seen["root"]) == 2 and len(seen["other"]) == 3, seen
    assert seen["root"] == [("Bearer s3cret", "sid=abc; jar=j1")] * 2, seen
    assert seen["other"] == [(None, None)] * 3, seen
    assert "s3cret" not in repr(sink.records)


async def test_the_browser_is_restarted_after_its_pages_and_no_page_is_lost(serve):
    """--browser-restart 4: 11 pages, a restart due after each 4th, made before the 5th and
    the 9th once the open tabs finished: every page rendered whole, each URL asked once."""
    site = await serve(spa_site())
    base = site.url
    crawler, sink = await crawl(base + "/", **BROWSER, requisites=True, concurrency=2, browser_restart=4,
                                browser_memory=0)
    browser = crawler._browser
    assert browser is not None and browser.restarts == 2
    assert len(browser.profiles) == 3 and not [p for p in browser.profiles if os.path.exists(p)]
    assert {r.url for r in sink.records if r.kind == "page"} == {base + p for p in spa_paths()}
    assert all(r.error is None for r in sink.records), [r for r in sink.records if r.error]
    assert {p: n for p, n in site.hits.items() if p != "/robots.txt"} == dict.fromkeys(spa_site(), 1)
    assert chromium_left() == []


async def test_the_browser_is_restarted_past_its_memory_and_no_page_is_lost(serve):
    """--browser-memory of 1 byte: the browser's PSS (read from /proc after each page) passes
    it every time, so each next page gets a new browser; a chain of 3 pages, one tab: 2."""
    img = '<img src="/i.png">'
    site = await serve({"/": page("/1", extra=img), "/1": page("/2", extra=img), "/2": page(extra=img),
                        "/i.png": spa_site()["/img/logo.png"]})
    crawler, sink = await crawl(site.url + "/", **BROWSER, requisites=True, concurrency=1, browser_memory=1)
    browser = crawler._browser
    assert browser is not None and browser.restarts == 2
    assert [r.url for r in sink.records if r.kind == "page"] == [site.url + p for p in ("/", "/1", "/2")]
    assert all(r.error is None for r in sink.records), [r for r in sink.records if r.error]
    assert site.hits["/i.png"] == 1  # claimed by the first tab; the later ones are not sent for it
    assert chromium_left() == []


async def test_a_hash_routed_apps_pages_are_each_crawled_and_recorded_once(serve):
    """`#/a`, `#!b`, `#/c` are pages of their own in a browser crawl, each opened in a tab
    whose router shows that route (each a GET of the one document); `#section` stays a place
    in a page. Without the browser, fragments are dropped as always."""
    site = await serve(hash_site())
    base = site.url
    _, sink = await crawl(base + "/", **BROWSER, requisites=True, fragments=True, concurrency=2)
    pages = [r.url for r in sink.records if r.kind == "page"]
    assert sorted(pages) == sorted(base + p for p in hash_pages()), pages
    assert all(r.error is None and r.status == 200 for r in sink.records), sink.records
    assert not [r for r in sink.records if "section" in r.url or r.missing_fragments], sink.records
    assert site.hits["/"] == len(hash_pages())  # the document, once for each route
    assert all(site.hits[f"/api/h/{n}.json"] == 1 for n in ("home", "a", "b", "c")), site.hits
    assert canonical(base + "/#/a") == base + "/"  # the crawl over: fragments dropped again


def test_the_browser_options_reach_the_crawl():
    """--page-timeout, --browser-restart and --browser-memory, read as the command line reads them."""
    from crawltop.cli.main import build_parser
    from crawltop.cli.options import config_from

    args = build_parser().parse_args(["crawl", "http://127.0.0.1:9/", "--browser", "--page-timeout", "5",
                                      "--browser-restart", "7", "--browser-memory", "256M", "--browser-quiet", "0.5"])
    config = config_from(args, args.roots)
    assert (config.browser, config.page_timeout, config.browser_restart, config.browser_memory,
            config.browser_quiet) == (True, 5.0, 7, 256 << 20, 0.5)
    root = "http://127.0.0.1:9/"
    default = config_from(build_parser().parse_args(["crawl", root, "--browser"]), [root])
    assert (default.page_timeout, default.browser_restart, default.browser_memory, default.browser_quiet) == (
        30.0, 100, 1 << 30, 2.0)


def naming(mark: str) -> list[str]:
    """Live (not zombie) processes whose command line names `mark` (a profile's folder)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in cmd and state != "Z":
            out.append(f"{entry} {cmd[:100]!r}")
    return out


def zombies_of(parent: int) -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == parent:
                out.append(entry)
    return out


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_no_chromium_outlives_crawltop_however_it_ends(serve, how):
    """A real crawltop, its tab waiting on an image: killed with SIGKILL (nothing of it runs
    after) or stopped with SIGTERM, within seconds no process of its browser is left, its
    profile is removed, and crawltop itself is reaped."""
    never = asyncio.Event()

    async def hold(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(body=b"x", content_type="image/png")

    site = await serve({"/": page("/a", extra='<img src="/never.png">'), "/a": page(), "/never.png": hold})
    # Its Chromium's profile and socket folder are made under TMPDIR: a short one, since a Unix
    # socket's path has 107 bytes and pytest's tmp_path under xdist is long enough to pass that.
    tmp_path = Path(tempfile.mkdtemp(prefix="ctb"))
    profiles = str(tmp_path / "crawltop-chromium-")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--browser", "--headless",
        "--browser-quiet", "0.2", "--page-timeout", "60", "--timeout", "60", "-o", str(tmp_path / "out.jsonl"),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        for _ in range(1200):  # Chromium is up and a tab is loading the page
            if "/never.png" in site.hits or proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        assert "/never.png" in site.hits and naming(profiles), "the crawl did not open its tab"
        proc.send_signal(how)
        await asyncio.wait_for(proc.wait(), 30)
        left = naming(profiles)
        for _ in range(150):  # seconds at most, on a loaded machine
            if not left:
                break
            await asyncio.sleep(0.1)
            left = naming(profiles)
        assert left == [], left
        for _ in range(150):  # the watchdog removes the profile once the processes are gone
            if not list(tmp_path.glob("crawltop-chromium-*")):
                break
            await asyncio.sleep(0.1)
        assert not list(tmp_path.glob("crawltop-chromium-*"))
        assert not list(tmp_path.glob("org.chromium.*"))  # the folder of Chromium's socket too
        assert zombies_of(os.getpid()) == []  # crawltop was reaped (what it left, init reaps)
    finally:
        never.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        shutil.rmtree(tmp_path, ignore_errors=True)


async def test_the_monitors_see_each_tabs_phase_and_the_browsers_memory(serve):
    """Mid-crawl, a snapshot shows the page worker in its tab's phase (loading: an image holds
    `load`) with the tab's requests in flight and bytes so far, and the browser's memory and
    restarts; `ctl status` (the headline) and a remote monitor (the codec) carry the same."""
    from crawltop.core.sockets.protocol import SnapshotDecoder, encode_snapshot, headline

    release = asyncio.Event()

    async def hold(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(body=b"x", content_type="image/png")

    site = await serve({"/": page("/held"), "/held": page(extra='<img src="/held.png">'), "/held.png": hold})
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), **BROWSER, requisites=True, concurrency=1,
                                  page_timeout=60.0, timeout=60.0, browser_memory=1 << 40))
    task = asyncio.ensure_future(crawler.crawl())
    try:
        seen = None
        for _ in range(1200):
            snap = crawler.stats.snapshot()
            tab = [w for w in snap.workers if w.url == site.url + "/held" and w.tab_requests]
            if tab and tab[0].phase == "loading" and snap.browser is not None and snap.browser.memory:
                seen = snap
                break
            await asyncio.sleep(0.05)
        assert seen is not None, crawler.stats.snapshot()
        worker = next(w for w in seen.workers if w.url == site.url + "/held")
        assert worker.tab_requests == 1 and worker.tab_bytes > 0, worker  # the image; the document served
        assert seen.browser is not None and seen.browser.memory > 10 << 20 and seen.browser.restarts == 0
        assert seen.browser.memory_limit == 1 << 40
        remote = SnapshotDecoder().decode(encode_snapshot(seen))
        mine = next(w for w in remote.workers if w.id == worker.id)
        assert remote.browser == seen.browser and (mine.phase, mine.tab_requests, mine.tab_bytes) == (
            "loading", 1, worker.tab_bytes)
        status = headline(seen, False)
        assert status["browser"] == {"memory": seen.browser.memory, "memory_limit": 1 << 40, "restarts": 0}
    finally:
        release.set()
        await asyncio.wait_for(task, 60)
    assert crawler.stats.snapshot().browser is not None


async def test_a_stop_while_a_failed_page_waits_for_its_next_try_leaves_each_seen_url_one_record(serve):
    """The tab timed out holding a claimed image; the page waits out its back-off for a next
    try when the crawl stops: the page and the image still get one Record each."""
    never = asyncio.Event()

    async def hold(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(body=b"x", content_type="image/png")

    site = await serve({"/": page(extra='<img src="/never.png">'), "/never.png": hold})
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), **BROWSER, requisites=True, page_timeout=1.0,
                                  backoff=60.0), sinks=[sink])
    task = asyncio.ensure_future(crawler.crawl())
    try:
        for _ in range(600):
            if crawler.stats.retries:
                break
            await asyncio.sleep(0.05)
        assert crawler.stats.retries == 1
        crawler.stop()
        await asyncio.wait_for(task, 60)
    finally:
        never.set()
    urls = sorted(r.url for r in sink.records)
    assert urls == [site.url + "/", site.url + "/never.png"], sink.records  # one each
    assert all(r.error_kind == "cancelled" for r in sink.records), sink.records
    assert chromium_left() == []


class AlwaysKilling(ListSink):
    """Kills the browser, while there is one, as each Record is written."""

    def write(self, record) -> None:  # type: ignore[no-untyped-def]
        super().write(record)
        if [line for line in chromium_left() if "--type=" not in line and "crashpad" not in line]:
            kill_chromium()


async def test_a_browser_that_keeps_dying_is_given_up_and_pages_say_why(serve):
    """Killed after every Record: each next page finds it dead (`browser: restarted`), until 3
    deaths with no page rendered between; then none is launched, and each page keeps its own
    answer and says why."""
    site = await serve({"/": page(*[f"/{n}" for n in range(1, 7)]), **{f"/{n}": page() for n in range(1, 7)}})
    sink = AlwaysKilling()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), **BROWSER, concurrency=1, backoff=0.01, timeout=5.0,
                                  max_tries=1), sinks=[sink])
    await asyncio.wait_for(crawler.crawl(), 90)
    assert sorted(r.url for r in sink.records) == sorted([site.url + "/", *(f"{site.url}/{n}" for n in range(1, 7))])
    assert all(r.status == 200 for r in sink.records), sink.records  # each keeps its own answer
    why = [r.error or "" for r in sink.records]
    assert any(w.startswith("browser: restarted") for w in why), why
    first = next(i for i, w in enumerate(why) if "3 times in a row" in w)  # given up: no page after is rendered
    assert all("3 times in a row" in w for w in why[first:]), why
    assert crawler._browser is not None and crawler._browser.relaunches == 2
    assert chromium_left() == []


def _tab_then(later: Any) -> tuple[Any, asyncio.Event]:
    """/hang: first an HTML page whose tab loads /a.png and hangs on /never.png (so the tab
    times out and what it loaded waits for the page's next try); then `later` for every try."""
    never = asyncio.Event()
    hits = {"n": 0}

    async def hang(request: web.Request) -> web.StreamResponse:
        hits["n"] += 1
        if hits["n"] == 1:
            return html(extra='<img src="/a.png"><img src="/never.png">')
        return await later(request)

    async def hold(request: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response(text="late")

    return {"/": page("/hang"), "/hang": hang, "/never.png": hold,
            "/a.png": lambda r: _now(web.Response(body=b"\x89PNG", content_type="image/png"))}, never


async def _tab_then_crawl(serve, then, *, tries: int):
    """Crawl `_tab_then(then)`'s site with `tries` tries of 2 s each: its site, and its
    Records by URL (one each)."""
    routes, never = _tab_then(then)
    site = await serve(routes)
    try:
        _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, page_timeout=2.0, max_tries=tries)
    finally:
        never.set()
    by = sink.by_url()
    assert len(sink.records) == len(by)
    return site, by


async def test_what_a_failed_tab_loaded_survives_a_retry_answered_503(serve):
    """The page's tab times out, its next tries are answered 503: the image the first tab
    loaded keeps its own answer, recorded once, whatever the later tries got."""
    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503, text="busy")
    site, by = await _tab_then_crawl(serve, busy, tries=3)
    assert by[site.url + "/hang"].status == 503 and by[site.url + "/hang"].tries == 3
    assert by[site.url + "/a.png"].status == 200 and by[site.url + "/a.png"].error is None, by[site.url + "/a.png"]
    assert by[site.url + "/never.png"].error
    assert site.hits["/a.png"] == 1 and site.hits["/never.png"] == 1


async def test_what_a_failed_tab_loaded_is_recorded_when_the_last_try_finds_no_server(serve):
    """The page's last try gets no answer at all (the connection dropped): its page fails,
    and what its first tab loaded is recorded with that tab's answers, not as cancelled."""
    async def drop(request: web.Request) -> web.Response:
        request.transport.abort()  # type: ignore[union-attr]  (what is written after is lost)
        return web.Response(text="lost")
    site, by = await _tab_then_crawl(serve, drop, tries=2)
    assert by[site.url + "/hang"].error and by[site.url + "/hang"].tries == 2
    image = by[site.url + "/a.png"]
    assert image.status == 200 and image.error is None and image.error_kind != "cancelled", image


@pytest.mark.parametrize("end", ["ignore", "stop with a state file"])
async def test_what_a_failed_tab_loaded_ends_with_its_page_taken_off_the_queue(serve, tmp_path, end):
    """The page's tab times out and the page waits out a long back-off for its next try;
    then an ignore takes it off the queue, or a stop leaves it queued in a state file: each
    URL its first tab loaded still gets its one Record."""
    from support.wait import wait_until

    async def never_again(request: web.Request) -> web.Response:
        raise AssertionError("the page is never tried again here")
    routes, never = _tab_then(never_again)
    site = await serve(routes)
    from crawltop.core.storage.open_state import open_state

    sink = ListSink()
    config = CrawlConfig(roots=(site.url + "/",), **BROWSER, requisites=True, page_timeout=2.0, max_tries=3,
                         backoff=60.0)
    store = None
    if end == "ignore":
        crawler = Crawler(config, sinks=[sink])
    else:  # the queue is kept in the file at a stop: nothing is drained
        config, store = open_state(str(tmp_path / "s.db"), config, {})
        crawler = Crawler(config, frontier=store, sinks=[sink, store.sink])
    task = asyncio.ensure_future(crawler.crawl())
    try:
        await wait_until(lambda: crawler.stats.retries >= 1, what="the page's first tab to fail")
        if end == "ignore":
            done = await crawler.steering.add_ignore("/hang$")
            assert done.ok and done.dropped == 1, done
        else:
            crawler.stop()
        await asyncio.wait_for(task, 60)
    finally:
        never.set()
        if not task.done():
            task.cancel()
        if store is not None:
            store.close()
    by = sink.by_url()
    assert len(sink.records) == len(by), sorted(r.url for r in sink.records)
    assert site.url + "/a.png" in by and site.url + "/never.png" in by, sorted(by)
    if end == "ignore":
        assert by[site.url + "/hang"].error_kind == "ignored", by[site.url + "/hang"]


async def test_a_long_tmpdir_does_not_keep_chromium_from_starting(serve):
    """Chromium's singleton socket goes under TMPDIR and a Unix socket's path has 107 bytes:
    under a TMPDIR longer than that leaves room for, crawltop gives Chromium /tmp instead."""
    site = await serve({"/": page("/a"), "/a": page()})
    base = Path(tempfile.mkdtemp(prefix="ctb"))
    long = base / ("d" * 90)
    long.mkdir()
    try:
        out = long / "out.jsonl"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--browser", "--headless", "-q",
            "--browser-quiet", "0.2", "--no-sitemaps", "-o", str(out),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "TMPDIR": str(long)})
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()[-500:]
        assert site.hits["/a"] == 1 and out.read_text().count('"status":200') == 2
        assert not list(long.glob("crawltop-chromium-*"))  # the profile, removed at the end
    finally:
        shutil.rmtree(base, ignore_errors=True)
