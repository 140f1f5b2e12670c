"""The dashboard under faults (a review's finds), with real detached crawls: a SIGSTOPped
crawl does not freeze it (a key's command gives up within the bound, the row says "not
answering", the other keys and crawls go on); two refreshes at once never open two links to
one crawl; a dropped connection to a crawl that still listens is a reconnect, not "lost"."""
from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_status
from support.wait import until, wait_until, wait_value

from crawltop.core.dashboard.board import Board
from crawltop.core.sockets.watch import REQUEST_TIMEOUT, Link
from crawltop.tui.top.app import TopApp

pytestmark = pytest.mark.timeout(180)


async def detached(*args: str) -> int:
    rc, out, err = await cli(*args, "--detach", "--no-robots")
    assert rc == 0, err
    return (await status(out.strip()))["pid"]


def open_links(name: str) -> list[Link]:
    return [o for o in gc.get_objects() if isinstance(o, Link) and o.name == name and not o._writer.is_closing()]


async def test_a_stopped_crawl_does_not_freeze_the_dashboard(site: str, rundir: Path, tmp_path: Path) -> None:
    frozen = await detached("crawl", site, "--name", "frozen", "-c", "2")
    await detached("crawl", site, "--name", "other", "-c", "2")
    board = Board()
    app = TopApp(board, cwd=tmp_path)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: all(n in board.rows and board.rows[n].summary is not None
                                           for n in ("frozen", "other")), 30)
            os.kill(frozen, signal.SIGSTOP)
            try:
                app.table.move_cursor(row=app.table.get_row_index("frozen"))
                await pilot.pause(0.05)
                async with asyncio.timeout(3):  # the key returns at once: its command waits in a worker
                    await pilot.press("p")
                sort = app.sort
                await pilot.press("o")  # other keys still work meanwhile (o: the next sort order)
                assert app.sort != sort
                app.table.move_cursor(row=app.table.get_row_index("other"))
                await pilot.pause(0.05)
                await pilot.press("p")  # and the other crawl still obeys
                await wait_status("other", lambda s: s["state"] == "PAUSED", 10)
                # the command to the stopped one gave up within the bound, and said so
                await until(pilot, lambda: any("not answering" in str(n.message) for n in app._notifications),
                            REQUEST_TIMEOUT + 3)
                await until(pilot, lambda: "not answering" in app.table.line_of("frozen"), REQUEST_TIMEOUT + 3)
            finally:
                os.kill(frozen, signal.SIGCONT)
            await until(pilot, lambda: "not answering" not in app.table.line_of("frozen"), 15)
            assert board.rows["frozen"].live
    finally:
        await board.close()


async def test_overlapping_refreshes_open_one_link_per_crawl(site: str, rundir: Path) -> None:
    await detached("crawl", site, "--name", "once", "-c", "1")
    board = Board()
    try:
        first = asyncio.create_task(board.tick())  # the refresh loop's tick, opening its links...
        await wait_until(board._ticking.locked, interval=0)  # from its first step: under way, not done
        board.look_now()  # ...when a key (n) asks for a look at once
        await board.tick()
        await first
        assert "once" in board.links
        assert len(open_links("once")) == 1
    finally:
        await board.close()


async def test_a_dropped_connection_to_a_live_crawl_is_a_reconnect(site: str, rundir: Path) -> None:
    await detached("crawl", site, "--name", "alive", "-c", "1")
    board = Board()
    try:
        await board.tick()
        link = board.links["alive"]
        sock = link._writer.transport.get_extra_info("socket")
        sock.shutdown(socket.SHUT_RDWR)  # this client's connection drops; the crawl lives on
        await wait_until(lambda: link.lost, 5, interval=0.05, what="the link lost")
        await board.tick()
        assert board.rows["alive"].live and board.lost_now == [], board.rows["alive"]
        await wait_value(board.tick, lambda _: "alive" in board.links and board.links["alive"].connected, 10)
        assert board.links["alive"] is not link and board.links["alive"].connected
        assert (rundir / "alive").exists()
        assert (await status("alive"))["state"] == "RUNNING"
    finally:
        await board.close()
