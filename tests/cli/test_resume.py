"""Crash-safe state end to end: real `crawltop` processes killed with SIGKILL and resumed.

The site is the bundled demo site (fast mode, ~2,070 URLs), served by its own process.
robots.txt stays on: it is what keeps the crawl out of the site's /private/ trap.
"""
from __future__ import annotations

import asyncio
import csv
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.endreport import committed
from support.wait import wait_for as poll
from support.wait import wait_until
from warcio.archiveiterator import ArchiveIterator

from crawltop.core.config import CrawlConfig
from crawltop.core.crawler import Crawler
from crawltop.core.storage.open_state import open_state
from crawltop.demo.site import EXPECTED, DemoSite

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "crawltop"
CMD = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "crawltop.cli"]
CONCURRENCY = 8
OPTS = ["--headless", "-c", str(CONCURRENCY), "--max-tries", "2"]

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve", "--fast"], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), url
    yield url
    proc.terminate()
    proc.wait(10)


def start(*args: str, out: Path) -> subprocess.Popen[bytes]:
    with open(out, "ab") as fh:
        return subprocess.Popen([*CMD, *args], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)




def setting(db: Path, key: str) -> object:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None
    finally:
        conn.close()


def wait_for(proc: subprocess.Popen[bytes], cond, timeout: float = 30) -> bool:
    """Poll until cond() or the process ends; True if cond() held while it ran."""
    held: list[bool] = []

    def settled() -> bool:
        if proc.poll() is not None:
            return True
        if cond():
            held.append(True)
        return bool(held)

    poll(settled, timeout, interval=0.01)
    return bool(held)


def exported(db: Path, tmp: Path) -> list[dict]:
    out = tmp / "export.jsonl"
    res = run("export", str(db), "--jsonl", str(out))
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_sigkill_at_random_points_then_resume_until_done(site_url, tmp_path):
    db, log, jsonl = tmp_path / "state.db", tmp_path / "log.txt", tmp_path / "out.jsonl"
    seed = int(os.environ.get("CRAWLTOP_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"kill seed {seed}")
    kills = 0
    # 1: killed at a random moment early on: maybe while starting, maybe while creating the file.
    proc = start("crawl", site_url, "--state", str(db), "-o", str(jsonl), *OPTS, out=log)
    time.sleep(rng.uniform(0.2, 0.8))
    proc.kill()
    proc.wait()
    kills += 1
    # 2..4: killed when the committed records reach random points of the crawl.
    points = sorted(rng.sample(range(150, EXPECTED.urls - 150), 3))
    for i, point in enumerate(points):
        # `crawl --state` also resumes, and works if the first kill came before the file existed.
        args = ("crawl", site_url, "--state", str(db), "-o", str(jsonl)) if i == 0 else ("resume", str(db))
        proc = start(*args, *OPTS, out=log)
        if wait_for(proc, lambda point=point: committed(db) >= point):
            proc.kill()
            proc.wait()
            kills += 1
        else:
            assert proc.returncode == 0, log.read_text()
    # Resume until done.
    for _ in range(3):
        if setting(db, "status") == "finished":
            break
        res = run("resume", str(db), *OPTS)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "records carried over" in res.stdout + res.stderr
    assert setting(db, "status") == "finished", log.read_text()

    records = exported(db, tmp_path)
    urls = Counter(r["url"] for r in records)
    dups = {u: n for u, n in urls.items() if n > 1}
    extra = sum(n - 1 for n in dups.values())
    assert len(urls) == EXPECTED.urls, f"lost or extra URLs (seed {seed})"
    assert all(u.startswith((site_url.rstrip("/"), "http://127.0.0.2:")) for u in urls)  # the demo's external host
    assert extra <= CONCURRENCY * kills, (seed, dups)
    assert all(n <= 1 + kills for n in dups.values())
    for u in dups:  # a duplicate comes from a refetch in a later run, never twice in one run
        runs = [r["run"] for r in records if r["url"] == u]
        assert len(set(runs)) == len(runs), (u, runs)
    print(f"kills {kills}, duplicates {extra}, runs {max(r['run'] for r in records)}")

    # The JSONL stream (written after each commit, caught up on resume) equals the export.
    lines = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines()]
    assert lines == [{k: v for k, v in r.items() if k != "run"} for r in records]

    # Finished: resuming is a no-op with a clear message.
    res = run("resume", str(db), "--headless")
    assert res.returncode == 0
    assert "already finished" in res.stderr and f"({len(records)} records)" in res.stderr
    assert len(exported(db, tmp_path)) == len(records)


def test_sigkill_with_warc_every_fetched_url_is_in_the_archive(site_url, tmp_path):
    """Crash safety of archives: a URL is done only once its records are written to the file. Killed with
    SIGKILL three times, resumed to the end: every URL with a status has its response or
    revisit in the WARCs, and every file (a killed run's cut back to its last record) is
    whole for `warcio check`."""
    db, log, warc = tmp_path / "state.db", tmp_path / "log.txt", tmp_path / "arch.warc.gz"
    rng = random.Random(int(os.environ.get("CRAWLTOP_KILL_SEED", random.randrange(1 << 30))))
    kills = left_open = 0
    for i, point in enumerate(sorted(rng.sample(range(200, EXPECTED.urls - 300), 3))):
        args = ("crawl", site_url, "--state", str(db), "--warc", str(warc), "--warc-max-size", "256K") \
            if i == 0 else ("resume", str(db))
        proc = start(*args, *OPTS, out=log)
        if wait_for(proc, lambda point=point: committed(db) >= point):
            proc.kill()
            proc.wait()
            kills += 1
            # (a kill between one file's close and the next one's open, in a rotation, leaves none)
            left_open += bool(list(tmp_path.glob("*.open")))
    assert kills >= 2, log.read_text()
    assert left_open, "no kill left its file open: nothing for the resume to finish"
    for _ in range(3):
        if setting(db, "status") == "finished":
            break
        res = run("resume", str(db), *OPTS)
        assert res.returncode == 0, res.stdout + res.stderr
    assert setting(db, "status") == "finished", log.read_text()

    records = exported(db, tmp_path)
    fetched = {r["url"] for r in records if r["status"] is not None}
    assert not list(tmp_path.glob("*.open"))
    files = sorted(tmp_path.glob("arch-*.warc.gz"))
    assert len(files) > kills + 1  # rotated, and each run wrote its own next files
    archived: Counter[str] = Counter()
    for path in files:
        check = subprocess.run([str(Path(sys.executable).parent / "warcio"), "check", str(path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, (path.name, check.stdout, check.stderr)
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    archived[rec.rec_headers.get_header("WARC-Target-URI")] += 1
    missing = fetched - set(archived)
    assert not missing, f"{len(missing)} fetched URLs have no record in the WARCs: {sorted(missing)[:5]}"
    index = (tmp_path / "arch.cdxj").read_text(encoding="utf-8").splitlines()
    assert len(index) == sum(archived.values()) and index == sorted(index)


def test_sigint_clean_stop_resume_warc_jsonl_and_export(site_url, tmp_path):
    db, log = tmp_path / "state.db", tmp_path / "log.txt"
    warc, jsonl = tmp_path / "crawl.warc.gz", tmp_path / "out.jsonl"
    proc = start("crawl", site_url, "--state", str(db), "--warc", str(warc), "-o", str(jsonl), *OPTS, out=log)
    assert wait_for(proc, lambda: committed(db) >= 400), log.read_text()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0, log.read_text()
    assert "crawltop report" in log.read_text()
    assert setting(db, "status") == "stopped"
    assert setting(db, "concurrency") == CONCURRENCY and setting(db, "paused") is False
    before = committed(db)
    assert before < EXPECTED.urls

    # Resume: same settings (the WARC and JSONL paths come from the state), -c overridden.
    res = run("resume", str(db), "--headless", "-c", "6")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resumed: {before:,} records carried over" in res.stdout
    assert setting(db, "status") == "finished" and setting(db, "concurrency") == 6
    assert json.loads(setting(db, "config"))["max_tries"] == 2  # kept from the first run

    records = exported(db, tmp_path)
    urls = Counter(r["url"] for r in records)
    assert len(urls) == EXPECTED.urls and len(records) == EXPECTED.urls  # a clean stop loses nothing, doubles nothing
    assert sum(1 for r in records if r["error"] and r["error"].startswith("BlockedByRobots")) == EXPECTED.robots_blocked

    # The JSONL stream was continued, not truncated, by the resume.
    lines = [json.loads(x)["url"] for x in jsonl.read_text(encoding="utf-8").splitlines()]
    assert Counter(lines) == urls

    # WARC: one response or revisit (and one request) per fetched URL, read back with warcio;
    # the resume wrote the series' next file, never into the first run's (a closed WARC stays as it was).
    fetched = {r["url"] for r in records if r["status"] is not None}
    responses: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    files = sorted(tmp_path.glob("crawl-*.warc.gz"))
    assert [f.name for f in files] == ["crawl-00000.warc.gz", "crawl-00001.warc.gz"]
    assert not list(tmp_path.glob("*.open"))
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                assert rec.rec_headers.protocol == "WARC/1.1"
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type in ("response", "revisit"):
                    responses[uri] += 1
                    rec.content_stream().read()
                elif rec.rec_type == "request":
                    requests[uri] += 1
    assert set(responses) == fetched and set(responses.values()) == {1}
    assert requests == responses
    # the state file names its archive: export --wacz finds the WARCs from it
    res = run("export", str(db), "--wacz", str(tmp_path / "crawl.wacz"))
    assert res.returncode == 0 and "WACZ of 2 WARC files" in res.stderr, res.stderr

    # Export to CSV as well.
    out_csv = tmp_path / "export.csv"
    res = run("export", str(db), "--csv", str(out_csv))
    assert res.returncode == 0 and f"exported {len(records)} records" in res.stderr
    with open(out_csv, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(records) and {r["url"] for r in rows} == set(urls)
    assert {r["status"] for r in rows} >= {"200", "404", ""}


@pytest.mark.parametrize("content", [b"definitely not a database\n" * 50, "version"], ids=["garbage", "other-version"])
def test_corrupt_or_foreign_state_file_exits_2_untouched(tmp_path, content):
    db = tmp_path / "state.db"
    if content == "version":
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO settings VALUES ('schema', '999')")
        conn.commit()
        conn.close()
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    for args in (("resume", str(db), "--headless"),
                 ("crawl", "http://127.0.0.1:9/", "--state", str(db), "--headless"),
                 ("export", str(db), "--jsonl", str(tmp_path / "x.jsonl"))):
        res = run(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "crawltop: error:" in res.stderr and str(db) in res.stderr
        assert "Traceback" not in res.stderr
        assert db.read_bytes() == before
    assert "schema version 999" in res.stderr if content == "version" else "not an SQLite database" in res.stderr


def test_resume_of_missing_state_file_exits_2(tmp_path):
    res = run("resume", str(tmp_path / "nope.db"), "--headless")
    assert res.returncode == 2 and "no such state file" in res.stderr
    assert not (tmp_path / "nope.db").exists()


async def test_paused_state_and_concurrency_survive_quit(tmp_path):
    """What the TUI does at quit (the CLI saves crawler.paused and crawler.concurrency)."""
    db = str(tmp_path / "state.db")
    async with DemoSite(fast=True) as site:
        config, store = open_state(db, CrawlConfig(roots=(site.url,), concurrency=4, backoff=0.01, sitemaps=True,
                                                                  requisites=True, external=True))
        crawler = Crawler(config, frontier=store, sinks=[store.sink])
        task = asyncio.ensure_future(crawler.crawl())
        await wait_until(lambda: crawler.stats.records >= 100)
        crawler.set_concurrency(3)
        crawler.pause()
        crawler.stop()
        await asyncio.wait_for(task, 10)
        store.save_session(status="stopped", paused=crawler.paused, concurrency=crawler.concurrency)
        done = crawler.stats.records
        store.close()

        config, store = open_state(db, None, {})
        assert config.start_paused and config.concurrency == 3
        assert store.resumed_records == done
        crawler = Crawler(config, frontier=store, sinks=[store.sink])
        assert crawler.paused
        task = asyncio.ensure_future(crawler.crawl())
        await wait_until(lambda: [w.phase for w in crawler.stats.snapshot().workers] == ["paused"] * 3)
        assert crawler.stats.records == 0  # still paused: nothing fetched
        crawler.resume()
        await asyncio.wait_for(task, 30)
        store.flush()
        urls = Counter(r["url"] for r in store.records())
        store.close()
    assert len(urls) == EXPECTED.urls and max(urls.values()) == 1


def test_dedup_from_an_earlier_crawls_state_file(site_url, tmp_path):
    """`--dedup-from OLD.db` deduplicates against an earlier crawl: an unchanged
    page is a revisit pointing at the URL and date of its copy in that crawl."""
    old, warc = tmp_path / "old.db", tmp_path / "new.warc.gz"
    res = run("crawl", site_url, "--state", str(old), "--max-pages", "80", "--headless", "-c", "1")
    assert res.returncode == 0, res.stderr
    earlier = {r["url"]: r for r in exported(old, tmp_path) if r["status"] == 200}
    res = run("export", str(old), "--wacz", str(tmp_path / "old.wacz"))  # a state file without --warc
    assert res.returncode == 2 and "wrote no WARC" in res.stderr and not (tmp_path / "old.wacz").exists()
    res = run("crawl", site_url, "--warc", str(warc), "--dedup-from", str(old), "--max-pages", "80",
              "--headless", "-c", "1", "--wacz", str(tmp_path / "new.wacz"))
    assert res.returncode == 0, res.stderr
    assert re.search(r"new\.wacz: WACZ of 1 WARC files, \d+ index lines, \d+ pages", res.stderr)  # at the end
    kinds: Counter[str] = Counter()
    old_digests = {r["digest"] for r in earlier.values()}
    with open(tmp_path / "new-00000.warc.gz", "rb") as fh:
        for rec in ArchiveIterator(fh):
            digest = rec.rec_headers.get_header("WARC-Payload-Digest")
            if rec.rec_type == "revisit":
                target = rec.rec_headers.get_header("WARC-Refers-To-Target-URI")
                assert digest == earlier[target]["digest"]
                assert rec.rec_headers.get_header("WARC-Refers-To-Date") == earlier[target]["fetched_at"]
            elif rec.rec_type == "response" and rec.http_headers.get_statuscode() == "200":
                assert digest not in old_digests, rec.rec_headers.get_header("WARC-Target-URI")  # a changed page
            kinds[rec.rec_type] += 1
    assert kinds["revisit"] >= 10, kinds  # (the two crawls reach partly different pages by their 80th URL)
    res = run("crawl", site_url, "--warc", str(warc), "--dedup-from", str(tmp_path / "nope.cdxj"), "--headless")
    assert res.returncode == 2 and "--dedup-from" in res.stderr and "Traceback" not in res.stderr
