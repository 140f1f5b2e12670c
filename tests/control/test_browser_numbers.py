"""Chromium's memory and restarts (--browser) wherever an operator looks besides the monitor:
the headless progress line, `crawltop ls` and the dashboard's detail line, from real --browser
crawls of a local site in their own processes. A plain crawl's lines stay without them
(tests/cli, tests/control/test_top.py and the snapshots pin those)."""
from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_gone, wait_status
from support.wait import until

from crawltop.cli.commands.ls import browser_cell
from crawltop.core.dashboard.board import Board
from crawltop.core.monitor import browsertext
from crawltop.core.monitor.summary import Summary, from_wire, to_wire
from crawltop.tui.top.app import TopApp, browser_parts

pytestmark = [pytest.mark.timeout(180), pytest.mark.chromium]

QUIET = "0.2"  # --browser-quiet: a page's tab is done 0.2 s after its network went still
WORDS = re.compile(r"chromium (\d+\.\d) MB restarts (\d+)")  # memory read (not '-'), in megabytes


async def test_the_headless_line_of_a_browser_crawl_says_chromiums_memory(site: str, tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop.cli", "crawl", site, "--browser", "--headless", "--browser-quiet", QUIET,
        "-c", "2", "--no-robots", "--max-pages", "40", "-o", str(tmp_path / "out.jsonl"),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = [line for line in err.decode().splitlines() if line.startswith("[")]
    assert lines, err.decode()[-2000:]
    read = [m for line in lines if (m := WORDS.search(line))]
    assert read, lines  # once Chromium's memory was read (about once a second), the line has it
    assert all(50 < float(m[1]) < 4096 and m[2] == "0" for m in read), lines


async def test_ls_and_the_dashboard_show_a_browser_crawls_chromium(site: str, rundir: Path, tmp_path: Path) -> None:
    rc, out, err = await cli("crawl", site, "--detach", "--name", "tabs", "--no-robots", "-c", "2",
                             "--browser", "--browser-quiet", QUIET)
    assert rc == 0, err
    pid = (await status("tabs"))["pid"]
    s = await wait_status("tabs", lambda s: (s.get("browser") or {}).get("memory", 0) > 0, 60)

    rc, text, err = await cli("ls")
    assert rc == 0, err
    header, row = text.splitlines()[:2]
    assert header.split()[:8] == ["NAME", "PID", "STATE", "MODE", "PAGES", "QUEUED", "PAGES/S", "CHROMIUM"]
    cells = row.split()
    assert cells[:4] == ["tabs", str(pid), "RUNNING", "detached"]
    assert re.fullmatch(r"\d+M", cells[7]) and 50 < int(cells[7][:-1]) < 4096 and cells[8] == "r0", row
    assert abs(int(cells[7][:-1]) - s["browser"]["memory"] / 2**20) < 2048  # the same gauge, read a moment later
    assert header.index("STARTED") - header.index("CHROMIUM") == 10  # a column of 8 cells: the table grows by 10

    board = Board()
    app = TopApp(board, cwd=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "tabs" in board.rows and board.rows["tabs"].summary is not None
                    and board.rows["tabs"].summary.browser.get("memory", 0) > 0, 30)
        await until(pilot, lambda: "chromium" in app.detail.plain, 5)
        m = re.search(r"chromium (\d+\.\d) MB  restarts (\d+)", app.detail.plain)
        assert m and 50 < float(m[1]) < 4096 and m[2] == "0", app.detail.plain
    rc, _, err = await cli("ctl", "tabs", "stop")
    assert rc == 0, err
    await wait_gone(pid, 60)


def test_the_words_and_a_plain_crawls_nothing() -> None:
    assert browsertext.words(412_000_000, 2) == "chromium 392.9 MB restarts 2"
    assert browsertext.words(0, 0) == "chromium - restarts 0"  # before the first reading
    assert browser_cell({"memory": 412_000_000, "memory_limit": 1 << 30, "restarts": 3}) == "393M r3"
    assert browser_cell(None) == "-" and browser_cell({"memory": float("inf"), "restarts": 1}) == "-"
    assert browser_parts({}) == []  # a crawl without --browser: its detail line as it was
    parts = browser_parts({"memory": 900 << 20, "memory_limit": 1 << 30, "restarts": 1})
    assert parts[1] == ("900.0 MB", "bold $warning")  # past 80% of --browser-memory: the warning colour
    plain = Summary(state="DONE", elapsed=1.0, pages=1, records=1, queued=0, seen=1, rate_now=0.0, rate_avg=1.0,
                    concurrency=1)
    assert from_wire(to_wire(plain)).browser == {}
    with pytest.raises(ValueError):
        from_wire({**to_wire(plain), "browser": {"memory": "lots"}})
