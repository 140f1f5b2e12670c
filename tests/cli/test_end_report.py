"""One end-of-crawl report (cli/endreport.py): a `resume` reports the whole crawl, the runs
before it included, field by field as one uninterrupted crawl of the same site does; a stop
says what became of the URLs still queued (kept for a resume, or cancelled); every count is
written with thousands separators.

The site is the bundled demo site (fast mode: 2,585 records, every outcome), served by its
own process, crawled by the real CLI.
"""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from support.crawl import crawl
from support.endreport import committed, count, demo_site, report_fields
from support.sites import counting_site, page, redirect
from support.wait import wait_for

CMD = [sys.executable, "-m", "crawltop.cli"]
OPTS = ["--headless", "--quiet", "-c", "8", "--max-tries", "2"]
# Counts a crawl of the same site must give whichever way it ran (stopped, resumed, killed).
# (Not merges: whether a redirect's target was seen first depends on the order of fetches.
# Not retries after a kill: they are counted by the engine as it goes, and die with it.)
SAME = ("records", "pages", "requisites", "external", "bytes", "outcomes", "redirects", "robots-blocked",
        "ignored", "truncated", "errors")

pytestmark = pytest.mark.timeout(180)


def seconds(fields: dict[str, str]) -> float:
    return float(fields["elapsed"].rstrip("s").replace(",", ""))


def assert_same_crawl(got: dict[str, str], one: dict[str, str]) -> None:
    """The same fields as one process's report, and the same counts."""
    assert set(got) - {"resumed", "queued at the stop"} == set(one), (sorted(got), sorted(one))
    for name in (*SAME, *(k for k in one if k.startswith(("status ", "error ")))):
        assert got[name] == one[name], (name, got[name], one[name])
    assert seconds(got) > 0 and float(got["pages/s"].replace(",", "")) > 0


@pytest.fixture(scope="module")
def demo() -> Iterator[str]:
    with demo_site() as url:
        yield url


@pytest.fixture(scope="module")
def one(demo: str) -> dict[str, str]:
    """The report of one uninterrupted crawl of the demo site, in memory."""
    done = subprocess.run([*CMD, "crawl", demo, *OPTS], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    fields = report_fields(done.stdout)
    assert count(fields, "records") > 2000 and "queued at the stop" not in fields, done.stdout
    return fields




def stopped_midway(demo: str, db: Path, sig: signal.Signals) -> str:
    """`crawl --state` sent `sig` once some records are committed; what it printed."""
    proc = subprocess.Popen([*CMD, "crawl", demo, "--state", str(db), *OPTS], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def three_hundred() -> bool:
        assert proc.poll() is None, proc.communicate()
        return committed(db) >= 300

    wait_for(three_hundred, 60, interval=0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (0 if sig == signal.SIGINT else -signal.SIGKILL), err[-2000:]
    return out


def test_counts_print_with_thousands_separators() -> None:
    from crawltop.cli.endreport import Left, Totals, number, render

    assert [number(n) for n in (0, 999, 1174, 1_234_567)] == ["0", "999", "1,174", "1,234,567"]
    assert number(2018.66, 1) == "2,018.7"
    totals = Totals.of_records({"url": f"http://a/{i}", "status": 200, "size": 1000, "kind": "page", "tries": 1}
                               for i in range(1174))
    totals.elapsed = 1.0
    out = render("http://a/", totals, left=Left(1500, kept=False))
    assert "records 1,174  pages 1,174" in out and "bytes 1,174,000" in out and "pages/s 1,174.0" in out
    assert "fetched 1,174 (2xx 1,174)" in out and "cancelled 1,500" in out and "    200  1,174" in out
    assert "queued at the stop: cancelled 1,500" in out
    assert not re.search(r"\d{4}", out.replace("http://a/", "")), out  # no count of 4 digits or more unseparated


async def test_counts_from_records_are_the_engine_s_own(serve) -> None:
    """The Redis and resume reports count records; one process counts as it emits them
    (core/monitor/stats.py). The same crawl gives the same report both ways."""
    from crawltop.cli.endreport import Totals, render

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500)

    site = await serve({"/robots.txt": page(), "/": page("/a", "/b", "/gone", "/moved", "/err"), "/a": page("/b"),
                        "/b": page("/moved"), "/moved": redirect("/a"), "/err": broken})
    crawler, sink = await crawl(site.url + "/", max_tries=2, sitemaps=False)
    snap = crawler.stats.snapshot()
    of_records = Totals.of_records(r.to_dict() for r in sink.records).with_run(snap)
    of_engine = Totals.of_snapshot(snap, crawler.stats.top_error_urls(10))
    assert render("x", of_records) == render("x", of_engine)
    assert "failed 1" in render("x", of_engine) and "    404  1" in render("x", of_engine)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_resume_reports_the_whole_crawl(demo: str, one: dict[str, str], tmp_path: Path, rundir: Path,
                                        how: str) -> None:
    """Stopped (Ctrl-C) or killed midway, then resumed: the resume's report is the whole
    crawl's, the same as one uninterrupted crawl's."""
    db = tmp_path / "s.db"
    first = stopped_midway(demo, db, signal.SIGINT if how == "stop" else signal.SIGKILL)
    before = committed(db)
    if how == "stop":  # the queue is kept in the state file, and the report says how to go on
        stop = report_fields(first)
        kept = re.fullmatch(r"kept ([\d,]+) \(resume with: crawltop resume (.+)\)", stop["queued at the stop"])
        assert kept and int(kept.group(1).replace(",", "")) > 0 and kept.group(2) == str(db), stop
        assert count(stop, "records") == before < count(one, "records")
        assert "cancelled 0" in stop["outcomes"]
    done = subprocess.run([*CMD, "resume", str(db), *OPTS], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = report_fields(done.stdout)
    assert_same_crawl(got, one)
    assert got["resumed"] == f"{before:,} records carried over from earlier runs"
    if how == "stop":  # the time and retries of the first run are kept in the state file
        assert seconds(got) >= seconds(report_fields(first))
        # The first run's retries are kept; but a stop spends the try of each URL in flight,
        # and a broken URL caught so on its first try gets its last one after the resume: one
        # retry fewer than a crawl that ran through (cli/endreport.py SAVED), never more.
        assert count(got, "retries") <= count(one, "retries"), (got["retries"], one["retries"])


def test_a_stop_in_memory_reports_the_queue_cancelled(rundir: Path) -> None:
    with counting_site(3000, 0.02) as site:  # 30 s at -c 2: stopped well before its end
        proc = subprocess.Popen([*CMD, "crawl", site.url, *OPTS, "-c", "2", "--no-sitemaps"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: sum(site.stats()["hits"].values()) >= 20, what="twenty pages served")  # crawling
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    fields = report_fields(out)
    cancelled = re.search(r"cancelled ([\d,]+)", fields["outcomes"])
    assert cancelled and fields["queued at the stop"] == f"cancelled {cancelled.group(1)}", fields
    assert int(cancelled.group(1).replace(",", "")) > 0
