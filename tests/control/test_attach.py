"""Detach, attach, ls, ctl: a detached crawl of a local site, in real processes over its socket."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_gone, wait_status
from support.wait import until, wait_until

from crawltop.cli.commands.attach import attach
from crawltop.core.sockets.client import RemoteCrawler
from crawltop.core.sockets.rundir import resolve
from crawltop.tui.app import CrawlApp
from crawltop.tui.screens.dialogs import ConfirmQuit

pytestmark = pytest.mark.timeout(120)


async def detached(url: str, name: str, *opts: str) -> int:
    rc, out, err = await cli("crawl", url, "--detach", "--name", name, "-c", "4", "--no-robots", *opts)
    assert rc == 0, err
    assert out.strip() == name
    return (await status(name))["pid"]


async def test_detach_ls_attach_pause_detach_attach_stop(site: str, rundir: Path, tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    pid = await detached(site, "t1", "-o", str(out))
    assert (rundir / "t1").is_socket() and oct((rundir / "t1").stat().st_mode & 0o777) == "0o600"
    assert oct(rundir.stat().st_mode & 0o777) == "0o700"

    rc, text, _ = await cli("ls")
    assert rc == 0
    header, row = text.splitlines()[:2]
    assert header.split()[:7] == ["NAME", "PID", "STATE", "MODE", "PAGES", "QUEUED", "PAGES/S"]
    assert row.split()[:3] == ["t1", str(pid), "RUNNING"] and site in row
    rc, text, _ = await cli("ls", "--json")
    [entry] = json.loads(text)
    assert entry["name"] == "t1" and entry["pid"] == pid and entry["root"] == site

    # Attach with Pilot, press p: another process sees PAUSED.
    remote = await RemoteCrawler.connect(resolve("t1"))
    app = CrawlApp(remote)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: remote.stats.snap.pages > 5, 20)
        await pilot.press("p")
        s = await wait_status("t1", lambda s: s["state"] == "PAUSED", 5)
        assert s["paused"] is True
        await until(pilot, lambda: app.last_snapshot is not None and app.last_snapshot.state == "PAUSED", 5)
        await pilot.press("p")
        await wait_status("t1", lambda s: s["state"] == "RUNNING", 5)
        await pilot.press("d")  # detach: the crawl goes on
        await until(pilot, lambda: not app.is_running, 5)
    assert remote.detached and remote.ended is None
    before = (await status("t1"))["pages"]
    await wait_status("t1", lambda s: s["pages"] > before + 5 and s["state"] == "RUNNING", 20)

    # Attach again, q -> stop: every record is written, the process ends, the socket goes.
    remote = await RemoteCrawler.connect(resolve("t1"))
    app = CrawlApp(remote)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.crawl_task is not None, 5)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), 5)
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, 30)
    await _ended(remote)  # the bye may come a moment after the app closed
    assert remote.ended == "ended" and not remote.lost, (remote.ended, remote.lost, remote.detached, app.failure)
    final = remote.stats.snap
    assert final.state == "DONE"
    await wait_gone(pid)
    assert not (rundir / "t1").exists()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == final.records == final.seen
    assert len({r["url"] for r in records}) == len(records)
    log = Path(os.environ["XDG_STATE_HOME"]) / "crawltop" / "log" / "t1.log"
    assert "crawltop report" in log.read_text()


async def test_sighup_to_the_shell_and_kill_9_of_a_monitor(site: str, rundir: Path) -> None:
    # The detaching shell runs in its own process group; SIGHUP it as a lost SSH session would.
    shell = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -m crawltop.cli crawl {site} --detach --name hup -c 4 --no-robots; sleep 60'],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert shell.stdout.readline().strip() == "hup"  # type: ignore[union-attr]
    os.killpg(shell.pid, signal.SIGHUP)
    assert shell.wait(timeout=10) != 0  # the shell died of it
    s = await status("hup")
    await wait_status("hup", lambda t: t["pages"] > s["pages"] + 5, 20)

    # A monitor in a terminal of its own, killed with -9: the crawl does not notice.
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
    monitor = subprocess.Popen([sys.executable, "-m", "crawltop.cli", "attach", "hup"],
                               stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    try:
        await wait_status("hup", lambda t: t["clients"] >= 1, 30)  # the monitor (ctl is not counted)
        monitor.kill()
        monitor.wait(timeout=10)
    finally:
        os.close(master)
    s = await wait_status("hup", lambda t: t["clients"] == 0, 10)
    await wait_status("hup", lambda t: t["pages"] > s["pages"] + 5 and t["state"] == "RUNNING", 20)
    rc, _, err = await cli("ctl", "hup", "stop")
    assert rc == 0, err
    await wait_gone(s["pid"])


async def test_two_monitors_see_the_same_state(site: str, rundir: Path) -> None:
    await detached(site, "two")
    other = await RemoteCrawler.connect(resolve("two"))
    remote = await RemoteCrawler.connect(resolve("two"))
    app = CrawlApp(remote)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.crawl_task is not None, 5)
            await pilot.press("p")
            # The second monitor pulls on its own timer; it sees PAUSED at its next pull.
            await until(pilot, lambda: other.stats.snapshot().state == "PAUSED" and other.paused, 5)
            await pilot.press("right_square_bracket")  # +10 workers in monitor one
            await until(pilot, lambda: other.stats.snapshot().concurrency == 14, 5)
            await until(pilot, lambda: app.last_snapshot is not None and app.last_snapshot.concurrency == 14, 5)
            a, b = app.last_snapshot, other.stats.snapshot()
            assert (a.state, a.concurrency) == (b.state, b.concurrency) == ("PAUSED", 14)
            await pilot.press("d")
        await other.request("stop")
        await other.crawl()
        assert other.ended == "ended" and other.stats.snap.state == "DONE"
    finally:
        await other.close()


async def test_crawl_process_killed_under_the_monitor(site: str, rundir: Path, capsys) -> None:
    pid = await detached(site, "dies")
    task = asyncio.create_task(attach(resolve("dies"), headless=True))
    await wait_status("dies", lambda t: t["clients"] >= 1, 10)  # the monitor (ctl is not counted)
    os.kill(pid, signal.SIGKILL)
    code = await asyncio.wait_for(task, 10)
    assert code == 1
    err = capsys.readouterr().err
    assert "lost the crawl 'dies'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


async def test_name_clash_exits_2_and_stale_socket_is_cleaned(site: str, rundir: Path) -> None:
    pid = await detached(site, "same")
    rc, out, err = await cli("crawl", site, "--detach", "--name", "same", "--no-robots")
    assert rc == 2 and out == ""
    assert "already running" in err and "Traceback" not in err
    rc, out, err = await cli("crawl", site, "--headless", "--name", "same", "--no-robots")
    assert rc == 2 and "already running" in err
    os.kill(pid, signal.SIGKILL)  # leaves its socket behind
    await wait_gone(pid)
    assert (rundir / "same").is_socket()
    rc, out, _ = await cli("ls")
    assert rc == 0 and out.strip() == "no live crawls"
    assert not (rundir / "same").exists()
    # and a stale socket never blocks its name
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(rundir / "same"))
    s.close()
    pid = await detached(site, "same")
    await cli("ctl", "same", "stop")
    await wait_gone(pid)


async def test_default_names_are_short_and_unique(site: str, rundir: Path) -> None:
    names = []
    for _ in range(2):
        rc, out, err = await cli("crawl", site, "--detach", "-c", "2", "--no-robots")
        assert rc == 0, err
        names.append(out.strip())
    assert names == ["127.0.0.1", "127.0.0.1-2"]
    rc, out, err = await cli("attach")
    assert rc == 1 and "2 crawls are running" in err
    for name in names:
        s = await status(name)
        assert (await cli("ctl", name, "stop"))[0] == 0
        await wait_gone(s["pid"])


async def test_ctl_errors_are_one_line_exit_1(site: str, rundir: Path) -> None:
    rc, _, err = await cli("ctl", "nope", "status")
    assert rc == 1 and err.count("\n") == 1 and "no crawl named 'nope'" in err
    pid = await detached(site, "c")
    for args, why in ((("concurrency", "x"), "whole number"), (("concurrency", "0"), "out of range"),
                      (("cancel-worker", "999"), "no worker 999"), (("dance",), "unknown action"),
                      (("pause", "3"), "takes no value")):
        rc, _, err = await cli("ctl", "c", *args)
        assert rc == 1 and why in err and err.count("\n") == 1, (args, err)
    assert (await cli("ctl", "c", "concurrency", "7"))[0] == 0
    assert (await status("c"))["concurrency"] == 7
    s = await status("c")
    for key in ("state", "pages", "records", "queued", "seen", "errors", "rate_now", "concurrency"):
        assert key in s
    worker = 1  # workers are numbered from 1; cancelling one shrinks the pool
    assert (await cli("ctl", "c", "cancel-worker", str(worker)))[0] == 0
    assert (await status("c"))["concurrency"] == 6
    assert (await cli("ctl", "c", "stop"))[0] == 0
    await wait_gone(pid)
    rc, _, err = await cli("ctl", "c", "status")
    assert rc == 1 and "no crawl named 'c'" in err


async def test_unsafe_run_dir_and_foreign_socket_are_refused(site: str, rundir: Path) -> None:
    rundir.mkdir(mode=0o700)
    os.chmod(rundir, 0o777)
    rc, _, err = await cli("crawl", site, "--headless", "--no-robots")
    assert rc == 2 and "writable by others" in err
    for args in (("ctl", "x", "status"), ("attach", "x"), ("ls",)):
        rc, _, err = await cli(*args)
        assert rc == 1 and "writable by others" in err, args
    os.chmod(rundir, 0o700)
    pid = await detached(site, "mine")
    if os.getuid() == 0:  # as root we can hand the socket to someone else
        os.chown(rundir / "mine", 65534, 65534)
        rc, _, err = await cli("ctl", "mine", "status")
        assert rc == 1 and "not to you" in err
        rc, _, err = await cli("attach", "mine")
        assert rc == 1 and "not to you" in err
        os.chown(rundir / "mine", 0, 0)
    assert (await cli("ctl", "mine", "stop"))[0] == 0
    await wait_gone(pid)


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] not in "ZX":
            out.append(int(stat.parent.name))
    return out


async def test_demo_detach_keeps_its_site_as_long_as_the_crawl(rundir: Path) -> None:
    rc, out, err = await cli("demo", "--fast", "--detach", "-c", "2", "--delay", "0.05")
    assert rc == 0, err
    assert out.strip() == "demo"
    s = await status("demo")
    [server] = _children(s["pid"])  # the demo site, a child of the crawl
    assert b"crawltop.demo.serve" in Path(f"/proc/{server}/cmdline").read_bytes()
    await wait_status("demo", lambda t: t["pages"] > s["pages"] + 3, 20)
    assert (await cli("ctl", "demo", "stop"))[0] == 0
    await wait_gone(s["pid"])
    await wait_gone(server)


async def test_the_same_loop_tui_listens_too(site: str, rundir: Path) -> None:
    """The default `crawltop crawl` (TUI and crawl on one loop) can be steered from another shell."""
    from crawltop.cli.listen import listen
    from crawltop.cli.main import build_parser
    from crawltop.core import CrawlConfig, Crawler

    args = build_parser().parse_args(["crawl", site, "--name", "local"])
    crawler = listen(Crawler(CrawlConfig(roots=(site,), concurrency=4, robots=False)), args)
    app = CrawlApp(crawler)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: crawler.stats.pages > 3, 20)
        assert not app.check_action("detach", ())  # a local crawl cannot be detached from
        rc, _, err = await cli("ctl", "local", "pause")
        assert rc == 0, err
        await until(pilot, lambda: crawler.paused and app.last_snapshot.state == "PAUSED", 5)
        rc, out, _ = await cli("ls", "--json")
        assert [c["name"] for c in json.loads(out)] == ["local"]
        assert json.loads(out)[0]["pid"] == os.getpid()
        await cli("ctl", "local", "resume")
        await until(pilot, lambda: not crawler.paused, 5)
        await pilot.press("q", "y")
        await until(pilot, lambda: not app.is_running, 30)
    assert crawler.stats.state == "DONE"
    assert not (rundir / "local").exists()


async def test_detach_with_state_warc_and_output(site: str, rundir: Path, tmp_path: Path) -> None:
    state, warc, out = tmp_path / "s.db", tmp_path / "w.warc.gz", tmp_path / "o.jsonl"
    pid = await detached(site, "st", "--state", str(state), "--warc", str(warc), "-o", str(out))
    await wait_status("st", lambda s: s["pages"] > 20, 20)
    assert (await cli("ctl", "st", "stop"))[0] == 0
    await wait_gone(pid)
    records = out.read_text().splitlines()
    assert len(records) > 20 and state.exists() and (tmp_path / "w-00000.warc.gz").stat().st_size > 0
    rc, exported, err = await cli("export", str(state), "--jsonl", "-")
    assert rc == 0, err
    urls = sorted(json.loads(r)["url"] for r in records)
    assert sorted(json.loads(r)["url"] for r in exported.splitlines()) == urls
    assert len(set(urls)) == len(urls)
    # and a detached resume carries on from there
    rc, name, err = await cli("resume", str(state), "--detach", "--name", "st2", "--no-robots")
    assert rc == 0, err
    s = await wait_status("st2", lambda s: s["pages"] > 5, 20)
    assert (await cli("ctl", "st2", "stop"))[0] == 0
    await wait_gone(s["pid"])
    assert len(out.read_text().splitlines()) > len(records)


async def test_a_crawl_that_ends_while_attached_shows_its_summary(site: str, rundir: Path) -> None:
    from crawltop.tui.panels.summary import SummaryScreen

    # one worker, 50 ms a page: 60 pages take 3 s or more, time enough to attach
    rc, out, err = await cli("crawl", site, "--detach", "--name", "short", "-c", "1", "--no-robots",
                             "--max-pages", "60")
    assert rc == 0, err
    remote = await RemoteCrawler.connect(resolve("short"))
    pid = remote.pid
    app = CrawlApp(remote)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen), 30)
        assert app.last_snapshot.state == "DONE" and app.last_snapshot.records == 60
        assert not app.check_action("detach", ())
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, 5)
    await _ended(remote)
    assert remote.ended == "ended" and not remote.lost
    await wait_gone(pid)


async def _ended(remote: RemoteCrawler, timeout: float = 10.0) -> None:
    """Wait for the crawl's bye (or the loss of it): an event, not a race with the app's exit."""
    with contextlib.suppress(AssertionError):  # the caller says what it expected
        await wait_until(lambda: remote.ended is not None or remote.lost, timeout, interval=0.05)
