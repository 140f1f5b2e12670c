"""One vocabulary of outcomes (core/outcomes.py), the same numbers on every surface.

A real site with a fixed mix (200s, 404s, a redirect, a robots-blocked URL, a refused host,
a URL taken off the queue by an ignore) is crawled headless by the real CLI, watched by
`ctl status` while it runs, stopped mid-crawl (one URL in flight: cancelled, not an error),
then read back by `report` and `export`; and crawled in the TUI under Pilot.
"""
from __future__ import annotations

import asyncio
import csv
import json
import re
from collections import Counter
from pathlib import Path

from aiohttp import web
from support.ctl import cli, wait_status
from support.sites import html, page
from support.tui import finished
from support.wait import until, wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.errors import KINDS
from crawltop.core.outcomes import KIND_OUTCOME, OUTCOMES, Tally, outcome, reason
from crawltop.tui.app import CrawlApp

REFUSED = "http://127.0.0.1:9/down"  # nothing listens on port 9 (discard)

# Before the stop: everything but /hold, which is in flight.
LIVE = {"fetched": 5, "redirected": 1, "failed": 1, "skipped": 2, "cancelled": 0}
LIVE_CLASSES = {"2xx": 3, "4xx": 2}
# After `ctl stop`: /hold was in flight, so it is cancelled; still one error.
FINAL = {**LIVE, "cancelled": 1}


def mixed_site(gate: asyncio.Event, hold: asyncio.Event) -> dict:
    async def gated(request: web.Request) -> web.StreamResponse:
        await gate.wait()
        return html("/a", "/missing1", "/missing2", "/private/x", "/old", "/skip", "/hold")

    async def held(request: web.Request) -> web.StreamResponse:
        await hold.wait()
        return web.Response(text="<p>held</p>", content_type="text/html")

    async def missing(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="gone")

    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(text="User-agent: *\nDisallow: /private/\n")

    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=301, headers={"Location": "/a"})

    return {
        # /hub answers when `gate` is set; the crawl is paused by then, so /skip waits queued
        # for its ignore. /hold answers when `hold` is set: in flight when the crawl stops.
        "/": page("/hub"),
        "/hub": gated,
        "/a": page(), "/missing1": missing, "/missing2": missing,
        "/robots.txt": robots, "/old": moved, "/skip": page(), "/hold": held,
    }


MIX = ("/a", "/missing1", "/missing2", "/old", "/skip", "/hold")


def outcomes_in(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """The outcome line's numbers: `fetched 5 (2xx 3, 4xx 2)  redirected 1 ...`."""
    line = next(ln for ln in text.splitlines() if "fetched " in ln and "cancelled " in ln)
    counts = {o: int(re.search(rf"\b{o} ([\d,]+)", line).group(1).replace(",", "")) for o in OUTCOMES}
    inner = re.search(r"fetched [\d,]+ \(([^)]*)\)", line)
    classes = {c: int(n) for c, n in re.findall(r"(\dxx) (\d+)", inner.group(1))} if inner else {}
    return counts, classes


def test_every_kind_has_one_outcome_and_words() -> None:
    assert set(KIND_OUTCOME) == set(KINDS)
    assert {KIND_OUTCOME[k] for k in ("robots", "ignored")} == {"skipped"}
    assert KIND_OUTCOME["cancelled"] == "cancelled"
    assert outcome(404, None) == "fetched" and outcome(301, None) == "redirected"
    assert outcome(503, "http-status") == "failed"
    assert reason("connect", "ClientConnectorError: Cannot connect to host x:9 (connection refused)") \
        == "connection refused"
    assert reason("dns", "ClientConnectorDNSError: Cannot connect to host nosuch.invalid:80") \
        == "name does not resolve"
    assert reason("timeout", "TimeoutError: no response within 30s") == "timed out after 30 s"
    assert reason("tls", "ClientConnectorCertificateError: certificate verify failed: certificate has expired") \
        == "TLS certificate expired"
    t = Tally()
    for status_, kind in ((200, None), (404, None), (301, None), (None, "connect"), (None, "cancelled")):
        t.add(status_, kind)
    assert t.counts == {"fetched": 2, "redirected": 1, "failed": 1, "skipped": 0, "cancelled": 1}
    assert t.classes == {"2xx": 1, "4xx": 1}


async def test_same_numbers_on_every_surface(serve, rundir: Path, tmp_path: Path) -> None:
    gate, hold = asyncio.Event(), asyncio.Event()
    site = await serve(mixed_site(gate, hold))
    out = tmp_path / "records.jsonl"
    proc = await asyncio.create_subprocess_exec(
        *_cli(), "crawl", site.url + "/", REFUSED, "--headless", "--name", "mix", "-c", "4", "--max-tries", "1",
        "--no-sitemaps", "-o", str(out),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    try:
        await wait_until(lambda: site.hits.get("/hub", 0) == 1, 30)
        assert (await cli("ctl", "mix", "pause"))[0] == 0
        gate.set()  # /hub answers; its links are queued while no worker takes any
        s = await wait_status("mix", lambda s: s["busy"] == 0 and s["queued"] >= len(MIX), 30)
        rc, said, err = await cli("ctl", "mix", "ignore", "add", "/skip$")
        assert rc == 0, err
        assert (await cli("ctl", "mix", "resume"))[0] == 0
        await wait_until(lambda: all(site.hits.get(p) for p in MIX if p != "/skip"), 30)
        s = await wait_status("mix", lambda s: s["records"] >= sum(LIVE.values()), 30)
        assert s["outcomes"] == LIVE and s["fetched_classes"] == LIVE_CLASSES
        assert s["errors"] == 1 and s["skipped"] == 2 and s["cancelled"] == 0
        rc, said, err = await cli("ctl", "mix", "stop")
        assert rc == 0 and said.startswith("stopping 'mix': 1 in flight and 0 queued cancelled"), (said, err)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        hold.set()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = stdout.decode()
    assert proc.returncode == 0, stderr.decode()  # stopped by the user: the crawl ran
    assert outcomes_in(text) == (FINAL, LIVE_CLASSES), text
    assert "errors: 1" in text and "connect: connection refused" in text

    # the records, read back by `report` (text and JSON) and by the one function
    rc, rep, _ = await cli("report", str(out), "--format", "json")
    data = json.loads(rep)
    assert data["outcomes"] == FINAL and data["fetched_classes"] == LIVE_CLASSES
    rc, rep_text, _ = await cli("report", str(out))
    assert outcomes_in(rep_text) == (FINAL, LIVE_CLASSES)
    assert "connection refused" in rep_text  # the reason in words, not ClientConnectorError
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert Counter(outcome(r["status"], r["error_kind"]) for r in records) == +Counter(FINAL)
    assert [r["error_kind"] for r in records if r["url"].endswith("/hold")] == ["cancelled"]


async def test_export_counts_as_report_does(serve, rundir: Path, tmp_path: Path) -> None:
    gate, hold = asyncio.Event(), asyncio.Event()
    gate.set()
    hold.set()
    site = await serve(mixed_site(gate, hold))
    state, csv_out = tmp_path / "c.db", tmp_path / "c.csv"
    rc, text, err = await cli("crawl", site.url + "/", REFUSED, "--headless", "--quiet", "-c", "2",
                              "--max-tries", "1", "--no-sitemaps", "--state", str(state))
    assert rc == 0, err
    assert "[" not in err  # --quiet: no progress lines
    expect = {"fetched": 7, "redirected": 1, "failed": 1, "skipped": 1, "cancelled": 0}  # /skip, /hold fetched
    assert outcomes_in(text)[0] == expect
    rc, _, err = await cli("export", str(state), "--csv", str(csv_out))
    assert rc == 0 and outcomes_in(err)[0] == expect, err
    with open(csv_out, newline="") as fh:
        assert Counter(row["outcome"] for row in csv.DictReader(fh)) == +Counter(expect)
    rc, rep, _ = await cli("report", str(state), "--format", "json")
    assert json.loads(rep)["outcomes"] == expect


async def test_tui_shows_the_same_numbers(serve) -> None:
    gate, hold = asyncio.Event(), asyncio.Event()
    site = await serve(mixed_site(gate, hold))
    crawler = Crawler(CrawlConfig(roots=(site.url + "/", REFUSED), concurrency=4, max_tries=1, sitemaps=False,
                                  backoff=0.01, timeout=5.0))
    app = CrawlApp(crawler, refresh_hz=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: site.hits.get("/hub", 0) == 1, 30)
        crawler.pause()
        gate.set()
        await until(pilot, lambda: crawler.frontier.size >= len(MIX), 30)
        assert (await crawler.steering.add_ignore("/skip$")).ok
        crawler.resume()
        await until(pilot, lambda: crawler.stats.records >= sum(LIVE.values()), 30)
        await pilot.pause(0.3)
        line = app.query_one("#status").render().plain  # the status lines, as drawn
        assert "errors 1" in line and "skipped 2" in line and "cancelled" not in line, line
        crawler.stop()
        hold.set()
        await finished(pilot, app)
        await pilot.pause(0.3)
        snap = crawler.stats.snapshot()
        assert snap.outcomes == FINAL and snap.fetched_classes == LIVE_CLASSES
        assert snap.errors == 1 and snap.errors_by_kind == {"connect": 1}
        assert [e.kind for e in snap.recent_errors] == ["connection refused"]


def _cli() -> list[str]:
    import sys

    return [sys.executable, "-m", "crawltop.cli"]
