"""`crawltop` alone, every crawl on one screen. Real detached crawls (the demo site
and two small sites, each in its own process), the dashboard under Pilot: it lists all of
them with their numbers, acts on the selected one only, opens its monitor and comes back,
starts a fourth, shows a SIGKILLed one as lost (its socket removed) and an ended one with
how it ended, from the summary it left in the run directory."""
from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_gone, wait_status
from support.sites import counting_site
from support.tmux import Tmux, needs_tmux
from support.wait import until, wait_until, wait_value

from crawltop.core.dashboard.board import Board
from crawltop.core.sockets import ended
from crawltop.core.sockets.client import RemoteCrawler
from crawltop.core.sockets.rundir import resolve
from crawltop.tui.app import CrawlApp
from crawltop.tui.fmt import compact
from crawltop.tui.panels.keybar import KeyBar
from crawltop.tui.top.app import Open, TopApp
from crawltop.tui.top.dialogs import ConfirmDismiss, ConfirmStop, NewCrawlPrompt

pytestmark = pytest.mark.timeout(180)


async def detached(*args: str) -> int:
    rc, out, err = await cli(*args, "--detach", "--no-robots")
    assert rc == 0, err
    return (await status(out.strip()))["pid"]


def line(app: TopApp, name: str) -> str:
    return app.table.line_of(name)


async def select(pilot, app: TopApp, name: str) -> None:
    app.table.move_cursor(row=app.table.get_row_index(name))
    await pilot.pause(0.05)
    assert app.selected_row() is not None and app.selected_row().name == name


async def test_dashboard_lists_acts_opens_starts_and_sees_a_crawl_lost(site: str, rundir: Path, tmp_path: Path) -> None:
    with counting_site(5_000, 0.1) as small:
        await detached("demo", "--name", "demo", "-c", "2")
        await detached("crawl", site, "--name", "big", "-c", "4")
        small_pid = await detached("crawl", small.url, "--name", "small", "-c", "2")

        board = Board()
        app = TopApp(board, cwd=tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            # all three, with their numbers
            await until(pilot, lambda: len(board.rows) == 3 and all(
                r.summary is not None and r.summary.pages > 2 for r in board.rows.values()), 60)
            assert app.table.row_keys() == ["big", "demo", "small"]  # sorted by name
            for name in ("big", "demo", "small"):
                text = line(app, name)
                assert "RUNNING" in text, text
            # the pages cell shows the crawl's own count: between its count before the last
            # refreshes and its count after the line was read (it keeps crawling meanwhile)
            before = (await status("big"))["pages"]
            await pilot.pause(1.5)  # three refreshes: the row now holds a summary asked after `before`
            shown = line(app, "big").split()[2]  # name, state, pages (no mode column at 120 wide)
            after = (await status("big"))["pages"]
            assert shown in {compact(n) for n in range(before, after + 1)}, (shown, before, after)
            assert site.rstrip("/").rsplit(":", 1)[1] in line(app, "big")  # the root (its port)

            # p pauses the selected crawl, and only it
            await select(pilot, app, "big")
            await pilot.press("p")
            await wait_status("big", lambda s: s["state"] == "PAUSED", 10)
            assert (await status("demo"))["state"] == "RUNNING"
            assert (await status("small"))["state"] == "RUNNING"
            await until(pilot, lambda: "PAUSED" in line(app, "big"), 5)
            await pilot.press("plus")  # + : one more worker for big only
            await wait_status("big", lambda s: s["concurrency"] == 5, 10)
            assert (await status("small"))["concurrency"] == 2

            # enter opens its monitor: the app ends with the crawl to open (cli/commands/top.py runs it)
            await pilot.press("enter")
            await until(pilot, lambda: not app.is_running, 5)
        assert app.return_value == Open("big")

        remote = await RemoteCrawler.connect(resolve("big"))
        monitor = CrawlApp(remote, from_list=True)
        async with monitor.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: monitor.last_snapshot is not None
                        and monitor.last_snapshot.state == "PAUSED", 10)
            await pilot.press("escape")  # back to the list; the crawl goes on
            await until(pilot, lambda: not monitor.is_running, 5)
        assert remote.detached and remote.ended is None
        await remote.close()
        assert (await status("big"))["state"] == "PAUSED"

        # the dashboard again, on the same board: n starts a fourth, relative -o in its cwd,
        # the hidden --header never on the screen
        app = TopApp(board, cwd=tmp_path, selected="big")
        async with app.run_test(size=(120, 40)) as pilot:
            assert app.selected_row().name == "big"
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, NewCrawlPrompt), 5)
            prompt = app.screen
            prompt.query_one("#new-line").value = f"{small.url} --name fourth -c 1 -o fourth.jsonl"
            prompt.query_one("#new-secret").value = "--header 'X-Token: s3cr3t-value'"
            assert "s3cr3t" not in _screen_text(app)
            await pilot.press("enter")
            await until(pilot, lambda: "fourth" in board.rows, 60)
            assert not isinstance(app.screen, NewCrawlPrompt)
            await wait_status("fourth", lambda s: s["pages"] > 0, 30)
            assert (tmp_path / "fourth.jsonl").exists()  # relative to the dashboard's directory
            fourth = await status("fourth")
            assert b"s3cr3t" not in Path(f"/proc/{fourth['pid']}/cmdline").read_bytes()

            # SIGKILL small: lost, once, and its socket removed
            os.kill(small_pid, signal.SIGKILL)
            await wait_gone(small_pid)
            await until(pilot, lambda: board.rows["small"].how == "lost", 15)
            assert "lost" in line(app, "small")
            await until(pilot, lambda: not (rundir / "small").exists(), 5)

            # k stops the selected crawl, after a yes; it stays listed with how it ended
            await select(pilot, app, "fourth")
            await pilot.press("k")
            await until(pilot, lambda: isinstance(app.screen, ConfirmStop), 5)
            await pilot.press("y")
            await until(pilot, lambda: board.rows["fourth"].how == "stopped", 30)
            assert "stopped (top)" in line(app, "fourth")
            await wait_gone(fourth["pid"])
            # x dismisses it, here and for every dashboard
            await select(pilot, app, "fourth")
            await pilot.press("x")
            await until(pilot, lambda: "fourth" not in app.table.row_keys(), 5)
            assert "fourth" not in ended.read_all()
            await pilot.press("q")
        await board.close()

        # A dashboard opened later still sees how the others ended (the summaries they left).
        rc, _, err = await cli("ctl", "demo", "stop")
        assert rc == 0, err
        later = Board()
        await wait_status_gone("demo")
        await later.tick()
        try:
            assert later.rows["demo"].how == "stopped" and later.rows["demo"].by == "crawltop ctl"
            assert later.rows["demo"].summary is not None and later.rows["demo"].summary.pages > 0
            assert later.rows["small"].how == "lost"
            assert later.rows["big"].live
        finally:
            await later.close()
        records = json.loads((rundir / ".ended" / "demo.json").read_text())
        assert records["summary"]["outcomes"]["fetched"] > 0


async def test_X_dismisses_every_ended_crawl_after_a_yes(site: str, rundir: Path, tmp_path: Path) -> None:
    """Crawls ended three ways (done by itself, stopped with ctl, lost to SIGKILL) and two live
    ones: X asks; n leaves the list as it was; X and y dismiss the ended ones, for every
    dashboard (their summaries leave the run directory), and the live ones stay."""
    with counting_site(3, 0.0) as tiny:
        rc, _, err = await cli("crawl", tiny.url, "--name", "done", "-c", "1", "--detach", "--no-robots")
        assert rc == 0, err
        await detached("crawl", site, "--name", "stopped", "-c", "1")
        lost_pid = await detached("crawl", site, "--name", "lost", "-c", "1")
        await detached("crawl", site, "--name", "live", "-c", "1")
        await detached("crawl", site, "--name", "other", "-c", "1")
        rc, _, err = await cli("ctl", "stopped", "stop")
        assert rc == 0, err
        os.kill(lost_pid, signal.SIGKILL)
        await wait_gone(lost_pid)

        gone = {"done", "stopped", "lost"}
        board = Board()
        app = TopApp(board, cwd=tmp_path)
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await until(pilot, lambda: {n for n, r in board.rows.items() if not r.live} == gone
                            and {n for n, r in board.rows.items() if r.live} == {"live", "other"}, 30)
                assert {board.rows[n].how for n in gone} == gone  # done, stopped, lost
                await until(pilot, lambda: "X Dismiss all" in app.query_one(KeyBar).plain, 5)

                # check_action looks up the rows' predicates (tui/actions.py TOP_ENABLED): x on an
                # ended crawl, k on a live one; typing the filter, only sort, help, quit and the palette
                await select(pilot, app, "done")
                assert app.check_action("dismiss", ()) and not app.check_action("stop", ())
                await select(pilot, app, "live")
                assert app.check_action("stop", ()) and app.check_action("ignore", ())
                assert not app.check_action("dismiss", ()) and not app.check_action("resume", ())
                await pilot.press("slash")
                await until(pilot, lambda: app.typing_filter, 5)
                assert not any(app.check_action(a, ()) for a in ("stop", "pause", "dismiss_all", "new", "filter"))
                assert all(app.check_action(a, ()) for a in ("sort", "help", "quit", "command_palette"))
                await until(pilot, lambda: "X Dismiss all" not in app.query_one(KeyBar).plain, 5)
                await pilot.press("escape")
                await until(pilot, lambda: not app.typing_filter and "X Dismiss all" in app.query_one(KeyBar).plain, 5)

                await pilot.press("X")
                await until(pilot, lambda: isinstance(app.screen, ConfirmDismiss), 5)
                assert set(app.screen.names) == gone
                await pilot.press("n")  # no: nothing is dismissed
                await until(pilot, lambda: not isinstance(app.screen, ConfirmDismiss), 5)
                await pilot.pause(0.6)  # a refresh: the rows are still there
                assert gone <= set(app.table.row_keys()) and gone <= set(ended.read_all())

                await pilot.press("X")
                await until(pilot, lambda: isinstance(app.screen, ConfirmDismiss), 5)
                await pilot.press("y")
                await until(pilot, lambda: set(app.table.row_keys()) == {"live", "other"}, 5)
                assert not gone & set(ended.read_all())  # for every dashboard
                assert "X Dismiss all" not in app.query_one(KeyBar).plain  # nothing left to dismiss
                await pilot.pause(2.5)  # a scan of the ended summaries later: still gone
                assert set(app.table.row_keys()) == {"live", "other"}
                await pilot.press("q")
        finally:
            await board.close()
        later = Board()
        try:
            await later.tick()
            assert set(later.rows) == {"live", "other"}
        finally:
            await later.close()
    assert (await status("live"))["state"] == "RUNNING" and (await status("other"))["state"] == "RUNNING"


async def wait_status_gone(name: str, timeout: float = 30) -> None:
    sock = Path(os.environ["CRAWLTOP_RUN_DIR"]) / name
    await wait_until(lambda: not sock.exists(), timeout, interval=0.1, what=f"the end of {name}'s socket")


def _screen_text(app: TopApp) -> str:
    """Everything the screen shows now (its SVG screenshot: the text is in it, escaped)."""
    return app.export_screenshot()


@needs_tmux
async def test_dashboard_in_tmux(site: str, rundir: Path, tmux: Tmux) -> None:
    """`crawltop` alone in a real terminal: keys sent to the pane, the pane captured."""
    await detached("crawl", site, "--name", "one", "-c", "2")
    await detached("crawl", site, "--name", "two", "-c", "2")
    tmux.new(shlex.join([sys.executable, "-m", "crawltop.cli"]), 100, 30)
    await until_screen(tmux, lambda s: "one" in s and "two" in s and s.count("RUNNING") >= 2, "both crawls")
    tmux.run("send-keys", "p")  # the first row (one) is selected
    await wait_status("one", lambda s: s["state"] == "PAUSED", 15)
    assert (await status("two"))["state"] == "RUNNING"
    await until_screen(tmux, lambda s: "PAUSED" in s, "PAUSED on the dashboard")

    tmux.run("send-keys", "Enter")  # its monitor, the screen of attach
    await until_screen(tmux, lambda s: "Workers 2" in s, "the monitor of one")
    await wait_status("one", lambda s: s["clients"] >= 2, 15)  # the dashboard's link and the monitor
    tmux.run("send-keys", "Escape")  # back to the list
    await until_screen(tmux, lambda s: "pages/s" in s and "sorted by name" in s, "the dashboard again")
    await wait_status("one", lambda s: s["clients"] == 1, 15)  # the monitor is gone, the crawl goes on
    tmux.run("send-keys", "q")
    await until_screen(tmux, lambda s: "sorted by name" not in s, "the dashboard closed")
    assert (await status("one"))["state"] == "PAUSED" and (await status("two"))["state"] == "RUNNING"


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.kill_server()


async def until_screen(tmux: Tmux, cond, what: str, timeout: float = 60) -> str:
    async def screen() -> str:
        return tmux.screen()

    try:
        shown = await wait_value(screen, cond, timeout, interval=0.3)
    except AssertionError as exc:
        raise AssertionError(f"never saw {what}: {exc}") from None
    assert isinstance(shown, str)
    return shown
