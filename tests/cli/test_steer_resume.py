"""Ignores and seeds persist in the --state file: a kill -9 mid-crawl, then `resume`
(the real CLI) restores them, and the endless calendar stays cut off."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "crawltop"
CMD = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "crawltop.cli"]
CAL = r"^https?://127\.0\.0\.1:\d+/cal/"

pytestmark = pytest.mark.timeout(90)

CHILD = """
import asyncio, dataclasses, sys
from crawltop.core import CrawlConfig, Crawler
from crawltop.core.storage.open_state import open_state
path, url, pattern = sys.argv[1:4]
config, store = open_state(path, CrawlConfig(roots=(url,), robots=False, concurrency=2, max_tries=1))
crawler = Crawler(dataclasses.replace(config, output=None), frontier=store, sinks=[store.sink])
async def main():
    task = asyncio.create_task(crawler.crawl())
    while crawler.frontier.size < 100:
        await asyncio.sleep(0.02)
    result = await crawler.steering.add_ignore(pattern)
    await store.aflush()
    print("ignored", result.dropped, flush=True)
    await asyncio.Event().wait()  # until killed
asyncio.run(main())
"""


@pytest.fixture
def trap_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "support.trapsite"], cwd=TESTS, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), url
    yield url + "/"
    proc.terminate()
    proc.wait(10)


def test_ignores_survive_kill_9_and_resume(tmp_path: Path, trap_url: str) -> None:
    db = tmp_path / "trap.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), trap_url, CAL], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    line = child.stdout.readline().split()
    assert line[0] == "ignored" and int(line[1]) > 50, line
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)

    conn = sqlite3.connect(db)
    saved = json.loads(conn.execute("SELECT value FROM settings WHERE key = 'ignores'").fetchone()[0])
    conn.close()
    assert [r["pattern"] for r in saved] == [CAL]

    # Without the ignore the calendar never ends; with it restored, the resume finishes.
    proc = subprocess.run([*CMD, "resume", str(db), "--headless"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(db)
    try:
        status = json.loads(conn.execute("SELECT value FROM settings WHERE key = 'status'").fetchone()[0])
        runs = dict(conn.execute("SELECT run, count(*) FROM records GROUP BY run").fetchall())
        cal_fetched_later = conn.execute(
            "SELECT count(*) FROM records WHERE run = 2 AND url LIKE '%/cal/%' "
            "AND json_extract(data, '$.status') IS NOT NULL").fetchone()[0]
        ignored = conn.execute("SELECT count(*) FROM records WHERE json_extract(data, '$.error_kind') = 'ignored'"
                               ).fetchone()[0]
        saved = json.loads(conn.execute("SELECT value FROM settings WHERE key = 'ignores'").fetchone()[0])
    finally:
        conn.close()
    assert status == "finished" and runs.get(2, 0) > 0
    assert cal_fetched_later <= 2  # at most the calendar pages that were in flight at the kill
    assert ignored == int(line[1])
    assert saved[0]["pattern"] == CAL and saved[0]["dropped"] == int(line[1])
