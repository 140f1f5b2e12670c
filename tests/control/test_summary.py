"""What the dashboard reads: the O(1) `summary` request, and the summary a crawl leaves in the run directory
when it ends (how it ended, who stopped it), against real detached crawls over their sockets."""
from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_gone, wait_status
from support.sites import counting_site
from support.wait import wait_until

from crawltop.core.monitor.summary import Summary, from_wire
from crawltop.core.outcomes import OUTCOMES
from crawltop.core.sockets import ended
from crawltop.core.sockets.protocol import PROTOCOL, encode

pytestmark = pytest.mark.timeout(120)


async def detached(url: str, name: str, *opts: str) -> int:
    rc, out, err = await cli("crawl", url, "--detach", "--name", name, "--no-robots", *opts)
    assert rc == 0, err
    return (await status(name))["pid"]


async def ask(r: asyncio.StreamReader, w: asyncio.StreamWriter, message: dict) -> dict:
    w.write(encode(message))
    return json.loads(await asyncio.wait_for(r.readline(), 5))


async def test_summary_is_small_and_a_stop_is_put_to_its_asker(site: str, rundir: Path) -> None:
    pid = await detached(site, "sum", "-c", "4")
    await wait_status("sum", lambda s: s["elapsed"] > 2.5)  # a few seconds of history for the sparkline
    r, w = await asyncio.open_unix_connection(str(rundir / "sum"))
    hello = await ask(r, w, {"op": "hello", "id": 0, "protocol": PROTOCOL, "client": "pytest\x1b[31m"})
    assert hello["ok"]
    reply = await ask(r, w, {"op": "summary", "id": 1})
    assert reply["ok"], reply
    got = reply["result"]
    # the row's numbers, none of a snapshot's rows or rings
    assert not {"workers", "hosts", "recent_errors", "recent_merges", "history_queue"} & set(got)
    assert got["name"] == "sum" and got["pid"] == pid and got["root"] == site and got["mode"] == "detached"
    s = from_wire(got)
    assert isinstance(s, Summary) and s.state == "RUNNING" and s.pages > 10 and s.concurrency == 4
    assert set(s.outcomes) == set(OUTCOMES) and s.outcomes["fetched"] >= s.pages
    assert sum(s.host_counts.values()) == 1  # one host, in some state
    assert 0 < len(s.spark) <= 30 and s.rate_now > 0
    assert len(encode(reply)) < 1200, len(encode(reply))

    stop = await ask(r, w, {"op": "stop", "id": 2})
    assert stop["ok"]
    await wait_gone(pid)
    w.close()
    record = ended.read_all()["sum"]
    assert record["how"] == "stopped" and record["by"] == "pytest?[31m"  # a name, never an escape
    assert record["pid"] == pid and record["root"] == site
    final = from_wire(record["summary"])
    assert final.state == "DONE" and final.pages >= s.pages
    assert oct((rundir / ".ended" / "sum.json").stat().st_mode & 0o777) == "0o600"


async def test_done_and_sigterm_leave_how_they_ended(rundir: Path) -> None:
    with counting_site(12, 0.0, fanout=3) as small, counting_site(100_000, 0.05) as big:
        rc, out, err = await cli("crawl", small.url, "--detach", "--name", "small", "--no-robots", "-c", "2")
        assert rc == 0, err
        await wait_until(lambda: "small" in ended.read_all(), interval=0.1)  # it ends by itself in a moment
        record = ended.read_all()["small"]
        assert record["how"] == "done" and record["by"] == ""
        assert record["summary"]["pages"] == 12 and record["summary"]["outcomes"]["fetched"] == 12

        pid = await detached(big.url, "big", "-c", "2")
        await wait_status("big", lambda s: s["pages"] > 2)
        os.kill(pid, signal.SIGTERM)
        await wait_gone(pid)
        record = ended.read_all()["big"]
        assert record["how"] == "stopped" and record["by"] == "SIGTERM"

        ended.dismiss("small")
        assert set(ended.read_all()) == {"big"}


def test_the_newest_summaries_are_kept(rundir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cron job's crawls must not grow the list forever: the KEEP newest stay."""
    monkeypatch.setattr(ended, "KEEP", 5)
    for i in range(8):
        ended.write(f"c{i}", {"name": f"c{i}", "how": "done", "ended": float(i), "summary": {}})
        os.utime(rundir / ".ended" / f"c{i}.json", (1_000 + i, 1_000 + i))
    ended.write("last", {"name": "last", "how": "done", "ended": 9.0, "summary": {}})
    assert sorted(ended.read_all()) == ["c4", "c5", "c6", "c7", "last"]
    assert oct((rundir / ".ended").stat().st_mode & 0o777) == "0o700"
