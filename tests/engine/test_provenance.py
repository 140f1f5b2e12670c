"""Where each record came from, in its fields: via, discovery, fetched_at, digest, error_kind, against real
servers on 127.0.0.1 and a real WARC file."""
from __future__ import annotations

import base64
import csv
import hashlib
import json
import re
import sqlite3
import time
from datetime import UTC, datetime

import pytest
from aiohttp import web
from support.crawl import crawl
from support.sites import held, page, redirect
from warcio.archiveiterator import ArchiveIterator

from crawltop.core import errors
from crawltop.core.output.provenance import MAX_HOPS, hop, hops_total, utc_iso
from crawltop.core.output.warc import WarcSink
from crawltop.core.storage.export import export_csv

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")


def test_hop_paths_keep_the_last_20_with_a_count() -> None:
    path = ""
    for n in range(1, 31):
        path = hop(path, "LE"[n % 2])
        assert hops_total(path) == n
        if n <= MAX_HOPS:
            assert "+" not in path and len(path) == n
        else:
            assert path == f"{n - MAX_HOPS}+" + path.split("+")[1] and len(path.split("+")[1]) == MAX_HOPS
    assert path.endswith("EL")  # the newest hop is last
    # equal paths are one shared object, however they were reached
    a = hop(hop("", "L"), "R")
    b = hop("".join(["L"]), "R")
    assert a == "LR" and a is b


def test_utc_iso_has_milliseconds_and_z() -> None:
    assert utc_iso(0.0) == "1970-01-01T00:00:00.000Z"
    assert utc_iso(1_700_000_000.5) == "2023-11-14T22:13:20.500Z"
    assert ISO.match(utc_iso())


async def test_via_and_discovery_across_links_frames_redirects_and_merges(serve) -> None:
    site = await serve({
        "/": page("/a", "/r1", "/fs"),
        "/a": lambda req: _async(_html('<a href="/b">b</a><iframe src="/framed"></iframe>')),
        "/fs": lambda req: _async(_html('<html><frameset><frame src="/f2"><frame src="/a"></frameset></html>')),
        "/b": page("/old"),
        "/framed": page("/c"),
        "/f2": page(),
        "/c": page(),
        "/r1": redirect("/r2", 301),
        "/r2": redirect("/end", 302),
        "/end": page(),
        "/old": redirect("/a", 301),  # /a was seen: a merge
    })
    t0 = time.time()
    _, sink = await crawl(site.url + "/")
    t1 = time.time()
    rec = {r.url.removeprefix(site.url): r for r in sink.records}
    assert len(rec) == len(sink.records) == 11
    expect = {
        "/": (None, ""), "/a": ("/", "L"), "/r1": ("/", "L"), "/b": ("/a", "LL"),
        "/framed": ("/a", "LE"), "/fs": ("/", "L"), "/f2": ("/fs", "LE"), "/c": ("/framed", "LEL"),
        "/r2": ("/r1", "LR"), "/end": ("/r2", "LRR"), "/old": ("/b", "LLL"),
    }
    for path, (via, disc) in expect.items():
        r = rec[path]
        assert (r.via, r.discovery) == ((site.url + via) if via else None, disc), path
        assert ISO.match(r.fetched_at or ""), path
        when = datetime.strptime(r.fetched_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
        assert t0 - 0.002 <= when <= t1, path
    assert rec["/old"].merged and rec["/old"].next_url == site.url + "/a"
    # a child's request goes out after its parent's
    assert rec["/"].fetched_at <= rec["/a"].fetched_at <= rec["/b"].fetched_at <= rec["/old"].fetched_at


def _html(body: str) -> web.Response:
    return web.Response(text=body, content_type="text/html")


async def test_digest_equals_the_warc_payload_digest(serve, tmp_path) -> None:
    big = bytes(range(256)) * 4000  # ~1 MB: read in many chunks
    site = await serve({
        "/": page("/big.bin", "/r", "/gz"),
        "/big.bin": lambda req: _async(web.Response(body=big, content_type="application/octet-stream")),
        "/r": redirect("/", 302),
        "/gz": lambda req: _async(_gzipped(req)),
    })
    warc = tmp_path / "out.warc.gz"
    sink = WarcSink(str(warc))
    _, records = await _crawl_with(site.url + "/", sink)
    payload = {}
    with open(tmp_path / "out-00000.warc.gz", "rb") as fh:  # the series' first file (WARCs rotate into numbered files)
        for r in ArchiveIterator(fh):
            if r.rec_type == "response":
                payload[r.rec_headers.get_header("WARC-Target-URI")] = r.rec_headers.get_header("WARC-Payload-Digest")
    assert len(payload) == 4
    for r in records.records:
        assert r.digest and r.digest == payload[r.url], r.url
    by = records.by_url()
    expect = "sha1:" + base64.b32encode(hashlib.sha1(big).digest()).decode()
    assert by[site.url + "/big.bin"].digest == expect
    # the gzip-encoded response: the digest is of the body as stored (decoded), as in the WARC
    assert (by[site.url + "/gz"].digest
            == "sha1:" + base64.b32encode(hashlib.sha1(b"<p>zipped</p>" * 50).digest()).decode())


async def _async(resp: web.StreamResponse) -> web.StreamResponse:
    return resp


def _gzipped(req: web.Request) -> web.Response:
    resp = web.Response(body=b"<p>zipped</p>" * 50, content_type="text/html")
    resp.enable_compression(web.ContentCoding.gzip)
    return resp


async def _crawl_with(root: str, extra) -> tuple[object, object]:
    from support.crawl import ListSink

    from crawltop.core import CrawlConfig, Crawler

    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(root,), backoff=0.01, timeout=5.0), sinks=[sink, extra])
    await crawler.crawl()
    return crawler, sink


async def test_error_kinds_come_from_the_closed_set(serve, unused_tcp_port) -> None:
    hang = held()  # never answers: the crawler's timeout (0.5 s) ends it

    async def nolocation(req: web.Request) -> web.StreamResponse:
        return web.Response(status=302)

    site = await serve({
        "/": page("/500", "/noloc", "/private/x", "/hang", "/loop1", f"http://127.0.0.1:{unused_tcp_port}/"),
        "/500": lambda req: _async(web.Response(status=500)),
        "/noloc": nolocation,
        "/robots.txt": lambda req: _async(web.Response(text="User-agent: *\nDisallow: /private/\n")),
        "/hang": hang,
        "/loop1": redirect("/loop2"),
        "/loop2": redirect("/loop3"),
        "/loop3": redirect("/loop4"),
        "/loop4": page(),
    })
    _, sink = await crawl([site.url + "/", f"http://127.0.0.1:{unused_tcp_port}/"], max_tries=2, timeout=0.5,
                          max_redirect=1, scope="any")
    kinds = {r.url.removeprefix(site.url): r.error_kind for r in sink.records if r.error}
    assert kinds == {
        "/500": "http-status", "/noloc": "missing-location", "/private/x": "robots", "/hang": "timeout",
        "/loop2": "too-many-redirects", f"http://127.0.0.1:{unused_tcp_port}/": "connect",
    }
    assert set(kinds.values()) <= set(errors.KINDS)
    for r in sink.records:
        assert (r.error is None) == (r.error_kind is None), r


def test_error_kind_of_network_exceptions() -> None:
    import socket
    import ssl

    import aiohttp

    from crawltop.core.parsing.urls import canonical

    assert errors.error_kind(TimeoutError()) == "timeout"
    assert errors.error_kind(aiohttp.ServerDisconnectedError()) == "reset"
    assert errors.error_kind(aiohttp.ClientPayloadError("cut")) == "truncated"
    assert errors.error_kind(aiohttp.InvalidURL("x")) == "bad-url"
    assert errors.error_kind(socket.gaierror(-2, "Name or service not known")) == "dns"
    assert errors.error_kind(ssl.SSLError()) == "tls"
    assert errors.error_kind(ConnectionRefusedError()) == "connect"
    assert errors.error_kind(ZeroDivisionError()) == "other"
    assert errors.error_kind(errors.Cancelled()) == "cancelled"
    assert canonical("http://x/") == "http://x/"


async def test_state_file_round_trip(serve, tmp_path) -> None:
    from crawltop.core import CrawlConfig, Crawler
    from crawltop.core.storage.open_state import open_state

    site = await serve({"/": page("/a"), "/a": page("/b"), "/b": redirect("/c"), "/c": page()})
    path = str(tmp_path / "s.db")
    config, store = open_state(path, CrawlConfig(roots=(site.url + "/",), backoff=0.01), {})
    try:
        await Crawler(config, frontier=store, sinks=[store.sink]).crawl()
        store.flush()
        recs = {r["url"].removeprefix(site.url): r for r in store.records()}
    finally:
        store.close()
    assert recs["/c"]["via"] == site.url + "/b" and recs["/c"]["discovery"] == "LLR"
    assert recs["/"]["via"] is None and recs["/"]["discovery"] == ""
    assert all(r["digest"].startswith("sha1:") and ISO.match(r["fetched_at"]) for r in recs.values())
    conn = sqlite3.connect(path)
    rows = dict((u.removeprefix(site.url), (v, d)) for u, v, d in conn.execute("SELECT url, via, discovery FROM urls"))
    conn.close()
    assert rows["/b"] == (site.url + "/a", "LL")
    out = tmp_path / "r.csv"
    export_csv(path, str(out))
    with open(out, newline="") as fh:
        rows_csv = {r["url"].removeprefix(site.url): r for r in csv.DictReader(fh)}
    for name in ("via", "discovery", "fetched_at", "digest", "error_kind"):
        assert name in rows_csv["/"]
    assert rows_csv["/c"]["via"] == site.url + "/b" and rows_csv["/c"]["discovery"] == "LLR"
    assert rows_csv["/"]["via"] == ""


async def test_queued_items_keep_provenance_across_a_resume(serve, tmp_path) -> None:
    """A URL queued in run 1 and fetched in run 2 still says where it came from."""
    from crawltop.core import CrawlConfig, Crawler
    from crawltop.core.storage.open_state import open_state

    site = await serve({"/": page("/a"), "/a": page("/b", "/f"), "/b": page(), "/f": page()})
    path = str(tmp_path / "s.db")
    config, store = open_state(path, CrawlConfig(roots=(site.url + "/",), backoff=0.01, concurrency=1), {})
    crawler = Crawler(config, frontier=store, sinks=[store.sink])

    def stop_after_a(record) -> None:
        if record.url.endswith("/a"):
            crawler.stop()

    class Stopper:
        def write(self, record) -> None:
            stop_after_a(record)

        def close(self) -> None:
            pass

    crawler.sinks.append(Stopper())
    try:
        await crawler.crawl()
    finally:
        store.close()
    config, store = open_state(path, None, {}, resume_only=True)
    try:
        assert store.size == 2
        await Crawler(config, frontier=store, sinks=[store.sink]).crawl()
        store.flush()
        recs = {r["url"].removeprefix(site.url): r for r in store.records()}
    finally:
        store.close()
    assert recs["/b"]["run"] == 2 and recs["/b"]["via"] == site.url + "/a" and recs["/b"]["discovery"] == "LL"


def test_schema_1_state_file_is_refused(tmp_path) -> None:
    from crawltop.core.errors import StateError
    from crawltop.core.storage.store import read_state

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO settings VALUES ('schema', ?)", (json.dumps(1),))
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="schema version 1; this crawltop reads version 2"):
        read_state(str(path))


async def test_truncated_body_digest_matches_the_warc_and_fetched_at_is_the_last_try(serve, tmp_path) -> None:
    """A body cut at --max-bytes is digested as stored; a retried URL's fetched_at is its last try."""
    tries: list[float] = []

    async def flaky(req: web.Request) -> web.Response:
        tries.append(time.time())
        return web.Response(status=503 if len(tries) == 1 else 200, text="<p>ok</p>", content_type="text/html")

    big = b"x" * 50_000
    site = await serve({"/": page("/big", "/flaky"),
                        "/big": lambda req: _async(web.Response(body=big, content_type="text/plain")),
                        "/flaky": flaky})
    warc = tmp_path / "t.warc.gz"
    from support.crawl import ListSink

    from crawltop.core import CrawlConfig, Crawler

    sink = ListSink()
    wsink = WarcSink(str(warc))
    await Crawler(CrawlConfig(roots=(site.url + "/",), max_bytes=10_000, backoff=0.3),
                  sinks=[sink, wsink]).crawl()
    by = sink.by_url()
    cut = by[site.url + "/big"]
    assert cut.truncated and cut.size == 10_000
    assert cut.digest == "sha1:" + base64.b32encode(hashlib.sha1(big[:10_000]).digest()).decode()
    with open(tmp_path / "t-00000.warc.gz", "rb") as fh:
        digests = {r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header("WARC-Payload-Digest")
                   for r in ArchiveIterator(fh) if r.rec_type == "response"}
    assert digests[site.url + "/big"] == cut.digest
    flaky_rec = by[site.url + "/flaky"]
    assert flaky_rec.tries == 2 and len(tries) == 2 and tries[1] - tries[0] >= 0.1
    when = datetime.strptime(flaky_rec.fetched_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    assert tries[0] + 0.1 <= when <= tries[1] + 0.001


def test_payload_digest_is_base32_of_the_sha1() -> None:
    """The table-driven base32 (core/output/provenance.py) against the standard library's."""
    import base64
    import hashlib

    from crawltop.core.output.provenance import new_hasher, payload_digest

    for n in range(0, 300, 7):
        body = bytes(range(256))[:n] * 3
        h = new_hasher()
        h.update(body)
        assert payload_digest(h) == "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()
