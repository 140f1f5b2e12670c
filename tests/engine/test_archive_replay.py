"""Archives end to end: a real crawl's archive as replay tools take it. One image under many
URLs and one page served twice give one response each and revisits; pywb, given only our
CDXJ, replays every URL, a revisited one with the original's body; `wacz validate` passes
on the package `crawltop export --wacz` writes, and its pages.jsonl has the titles."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
from aiohttp import web
from support.archive_tools import Wayback, tool
from support.crawl import ListSink

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.output.cdxj import read as read_cdxj
from crawltop.core.output.warc import WarcSink

pytestmark = [pytest.mark.timeout(240), pytest.mark.pywb]

LOGO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
IMAGES = 12


def _html(title: str, *links: str) -> bytes:
    return (f"<html><head><title>{title}</title></head><body>"
            + "".join(f'<a href="{u}">{u}</a>' for u in links) + "</body></html>").encode()


def routes() -> dict:
    async def home(request: web.Request) -> web.Response:
        links = [f"/img/{i}.png" for i in range(IMAGES)] + ["/about", "/about?ref=home", "/other"]
        return web.Response(body=_html("Home", *links), content_type="text/html")

    async def logo(request: web.Request) -> web.Response:
        return web.Response(body=LOGO, content_type="image/png")

    async def about(request: web.Request) -> web.Response:  # the same page under two URLs
        return web.Response(body=_html("About us", "/"), content_type="text/html")

    async def other(request: web.Request) -> web.Response:
        return web.Response(body=_html("Other page"), content_type="text/html")

    return {"/": home, **{f"/img/{i}.png": logo for i in range(IMAGES)}, "/about": about, "/other": other}


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


async def test_revisits_replay_in_pywb_and_the_wacz_validates(serve, tmp_path: Path) -> None:
    site = await serve(routes())
    arch = tmp_path / "arch"
    arch.mkdir()
    sink = ListSink()
    warc = WarcSink(str(arch / "site.warc.gz"), max_size=8192)  # small: the revisits span files
    await Crawler(CrawlConfig(roots=(site.url + "/",), robots=False, sitemaps=False), sinks=[sink, warc]).crawl()
    fetched = {r.url for r in sink.records if r.status == 200}
    assert len(fetched) == IMAGES + 4
    assert (warc.responses, warc.revisits) == (4, IMAGES - 1 + 1)  # home, logo, about, other; the rest revisits
    files = sorted(arch.glob("site-*.warc.gz"))
    assert len(files) >= 2

    # the index: one line per response and revisit, sorted, the same as webrecorder's indexer makes
    index = arch / "site.cdxj"
    lines = index.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(fetched) and lines == sorted(lines)
    theirs = subprocess.run([tool("cdxj-indexer"), *[f.name for f in files]], cwd=arch, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert sorted(theirs) == lines
    assert sum(1 for _, _, f in read_cdxj(str(index)) if f["mime"] == "warc/revisit") == IMAGES

    # pywb replays every URL from our CDXJ alone; a revisit comes back with the original's body
    wb = Wayback(tmp_path / "pywb", index, arch)
    try:
        for i in range(IMAGES):
            status, body = fetch(wb.url(f"{site.url}/img/{i}.png"))
            assert (status, body) == (200, LOGO), i
        status, body = fetch(wb.url(f"{site.url}/about?ref=home"))
        assert status == 200 and b"<title>About us</title>" in body
        status, body = fetch(wb.url(f"{site.url}/other"))
        assert status == 200 and b"Other page" in body
    finally:
        wb.stop()

    # WACZ: webrecorder's validator passes it; pages.jsonl lists the HTML pages with titles
    wacz = tmp_path / "site.wacz"
    res = subprocess.run([sys.executable, "-m", "crawltop.cli", "export", str(arch / "site.warc.gz"),
                          "--wacz", str(wacz)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    check = subprocess.run([tool("wacz"), "validate", "-f", str(wacz)], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0 and "Validation succeeded" in check.stdout, check.stdout + check.stderr
    with zipfile.ZipFile(wacz) as z:
        names = set(z.namelist())
        assert {f"archive/{f.name}" for f in files} | {"indexes/index.cdxj", "pages/pages.jsonl",
                                                        "datapackage.json", "datapackage-digest.json"} == names
        assert all(z.getinfo(f"archive/{f.name}").compress_type == zipfile.ZIP_STORED for f in files)
        pages = [json.loads(x) for x in z.read("pages/pages.jsonl").decode().splitlines()[1:]]
        package = json.loads(z.read("datapackage.json"))
    assert package["wacz_version"] == "1.1.1"
    assert {(p["url"], p["title"]) for p in pages} == {
        (site.url + "/", "Home"), (site.url + "/about", "About us"), (site.url + "/about?ref=home", "About us"),
        (site.url + "/other", "Other page")}
