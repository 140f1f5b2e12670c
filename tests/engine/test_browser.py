"""`--browser`: pages that scripts build, crawled in Debian's headless Chromium through
Playwright (core/fetching/browser.py), against real aiohttp sites on 127.0.0.1.

Without Playwright or a Chromium these skip with the reason; in CI (CI set) they must run.
"""
from __future__ import annotations

import asyncio
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from aiohttp import web
from support.crawl import ListSink, crawl
from support.sites import html, page, redirect
from support.spasite import doc_paths, docs_site, spa_paths, spa_site
from warcio.archiveiterator import ArchiveIterator

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.errors import UsageError
from crawltop.core.fetching.browser import executable
from crawltop.core.output.warc import WarcSink


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
    """Live (not zombie) Chromium processes descended from this one."""
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
        if p == me and pid != me and state != "Z" and "chrom" in cmd:
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
    profiles = set(glob.glob(os.path.join(tempfile.gettempdir(), "crawltop-chromium-*")))  # other runs' own
    _, sink = await crawl_warc(base + "/", warc, browser=True, requisites=True, concurrency=4, timeout=5.0)
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
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "crawltop-chromium-*"))) <= profiles  # nor its profile


@pytest.mark.parametrize("site_of", [spa_site, docs_site], ids=["spa", "docsify"])
async def test_without_the_browser_only_the_root_is_found(serve, site_of):
    site = await serve(site_of())
    _, sink = await crawl(site.url + "/", requisites=True)
    assert [r.url for r in sink.records if r.kind == "page"] == [site.url + "/"]


async def test_the_browsers_requests_pass_the_crawls_rules(serve):
    """--exclude: the script's images are aborted in the browser, never requested nor recorded."""
    site = await serve(spa_site())
    _, sink = await crawl(site.url + "/", browser=True, requisites=True, exclude=(r"\.png$",), concurrency=4)
    assert not [r for r in sink.records if r.url.endswith(".png")]
    assert not [p for p in site.hits if p.endswith(".png")]
    assert {r.url for r in sink.records if r.kind == "page"} == {site.url + p for p in spa_paths()}


async def test_a_page_that_is_no_html_or_a_redirect_is_an_ordinary_record_of_one_request(serve):
    async def text(request: web.Request) -> web.StreamResponse:
        return web.Response(text="plain", content_type="text/plain")

    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=301, headers={"Location": "/new"})

    site = await serve({"/": page("/notes.txt", "/old"), "/notes.txt": text, "/old": moved, "/new": page()})
    _, sink = await crawl(site.url + "/", browser=True, requisites=True)
    by = sink.by_url()
    notes = by[site.url + "/notes.txt"]
    assert notes.status == 200 and (notes.content_type or "").startswith("text/plain")
    assert by[site.url + "/old"].status == 301 and by[site.url + "/old"].next_url == site.url + "/new"
    assert by[site.url + "/new"].status == 200
    assert {p: n for p, n in site.hits.items() if p != "/robots.txt"} == {"/": 1, "/notes.txt": 1, "/old": 1, "/new": 1}


@pytest.mark.flaky(reruns=1, only_rerun=["AssertionError"])  # a 3 s hard limit, timed on a shared machine
async def test_a_hung_tab_is_a_record_with_a_reason_and_the_crawl_goes_on(serve):
    """An image that never answers holds the page's `load`: the tab's hard limit (3 x
    --timeout) ends it; the page keeps its answer and says why, the image says why too."""
    async def never(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(60)
        return web.Response(text="late")

    site = await serve({"/": page("/hang", "/ok"), "/hang": lambda r: _now(html(extra='<img src="/never.png">')),
                        "/never.png": never, "/ok": page()})
    started = time.monotonic()
    _, sink = await crawl(site.url + "/", browser=True, requisites=True, timeout=1.0)
    assert time.monotonic() - started < 30
    by = sink.by_url()
    hung = by[site.url + "/hang"]
    assert hung.status == 200 and hung.error_kind == "timeout" and "browser" in (hung.error or ""), hung
    assert by[site.url + "/never.png"].error, by[site.url + "/never.png"]
    assert by[site.url + "/ok"].status == 200 and by[site.url + "/ok"].error is None
    assert site.hits["/never.png"] == 1
    assert chromium_left() == []


async def _now(resp: web.StreamResponse) -> web.StreamResponse:
    return resp


async def test_a_missing_chromium_is_a_usage_error_before_any_request(serve, tmp_path):
    site = await serve({"/": page()})
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), browser=True, browser_path=str(tmp_path / "none")))
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


@pytest.mark.parametrize("kills", [1, 2])
async def test_a_browser_that_dies_is_launched_again_once_then_pages_fail_with_the_reason(serve, kills):
    site = await serve(spa_site())
    base = site.url
    sink = KillingSink({base + "/", base + "/p/0"} if kills == 2 else {base + "/"})
    crawler = Crawler(CrawlConfig(roots=(base + "/",), browser=True, requisites=True, concurrency=1, backoff=0.01,
                                  timeout=5.0), sinks=[sink])
    await asyncio.wait_for(crawler.crawl(), 90)
    assert sink.killed == kills
    by = sink.by_url()
    if kills == 1:  # the next page is rendered by a new browser: nothing lost
        assert {r.url for r in sink.records if r.kind == "page"} == {base + p for p in spa_paths()}
        assert all(r.error is None for r in sink.records), [r for r in sink.records if r.error]
    else:  # after the second death a page keeps its own answer and says why it was not rendered
        after = [r for r in sink.records if r.url not in (base + "/", base + "/p/0") and r.kind == "page"]
        assert after and all("died twice" in (r.error or "") for r in after), after
        assert by[base + "/p/0"].status == 200
    assert chromium_left() == []


async def test_a_stop_while_a_tab_loads_leaves_each_seen_url_one_record(serve):
    """The tab claimed the image (seen, so never fetched again): stopped before the page's
    Record, the image still gets its one Record, cancelled, as the page does."""
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(30)
        return web.Response(body=b"x", content_type="image/png")

    site = await serve({"/": page(extra='<img src="/slow.png">'), "/slow.png": slow})
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), browser=True, requisites=True, timeout=10.0), sinks=[sink])
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
    _, sink = await crawl(site.url + "/", browser=True, requisites=True, concurrency=1, timeout=5.0)
    by = sink.by_url()
    assert by[site.url + "/app.js"].status == 503  # its one Record: the answer its claim got
    assert by[site.url + "/built"].status == 200, sink.records  # found by the second tab's script
    assert calls[0] >= 2


async def test_redirects_a_tab_follows_pass_the_crawls_rules(serve):
    """Chromium routes no redirect's target: each hop is followed by the crawl, so one into
    --exclude or robots.txt's Disallow is never requested; an allowed one is the first's
    redirect, recorded once."""
    robots = web.Response(text="User-agent: *\nDisallow: /secret/\n", content_type="text/plain")
    img = web.Response(body=b"\x89PNG", content_type="image/png")
    site = await serve({
        "/robots.txt": lambda r: _now(robots),
        "/": page(extra='<img src="/r1.png"><img src="/r2.png"><img src="/r3.png">'),
        "/r1.png": redirect("/private/x.png"), "/r2.png": redirect("/secret/y.png"), "/r3.png": redirect("/ok.png"),
        "/private/x.png": lambda r: _now(img), "/secret/y.png": lambda r: _now(img), "/ok.png": lambda r: _now(img),
    })
    base = site.url
    _, sink = await crawl(base + "/", browser=True, requisites=True, exclude=("/private/",), timeout=5.0)
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
