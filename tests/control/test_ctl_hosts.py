"""`crawltop ctl NAME hosts` and the queues view of an attached monitor: a detached
crawl of three hosts (the slow counting site on 127.0.0.1 and two aiohttp servers on
127.0.0.2 and 127.0.0.3), over its real Unix socket, from real child processes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ctl import cli, wait_gone, wait_status
from support.sites import page
from support.wait import until

from crawltop.core.queueing.hosts import STATES
from crawltop.core.sockets.client import RemoteCrawler
from crawltop.core.sockets.rundir import resolve
from crawltop.tui.app import CrawlApp
from crawltop.tui.screens.queues import QueuesScreen

pytestmark = pytest.mark.timeout(120)


def many(n: int) -> dict:
    routes = {"/": page(*[f"/p{i}" for i in range(n)])}
    routes.update({f"/p{i}": page() for i in range(n)})
    return routes


async def test_ctl_hosts_table_json_sort_state_and_attached_queues_view(site: str, rundir: Path, serve) -> None:
    others = [await serve(many(200), f"127.0.0.{i}") for i in (2, 3)]
    roots = [site] + [s.url + "/" for s in others]
    rc, _, err = await cli("crawl", *roots, "--detach", "--name", "hx", "-c", "4", "--no-robots", "--delay", "0.5")
    assert rc == 0, err
    s = await wait_status("hx", lambda t: t["pages"] >= 6)
    names = {r.split("//")[1].rstrip("/") for r in roots}

    rc, out, err = await cli("ctl", "hx", "hosts")
    assert rc == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["HOST", "STATE", "QUEUED", "FLIGHT", "DONE", "ERRORS", "DELAY", "SOURCE", "AVG_MS",
                              "OVER"]
    assert {r.split()[0] for r in rows} == names
    assert all(r.split()[1] in STATES for r in rows), rows
    assert all("0.5s" in r.split() and "delay" in r.split() for r in rows), rows  # --delay decides it

    rc, out, err = await cli("ctl", "hx", "hosts", "--json", "--sort", "host")
    assert rc == 0, err
    table = [json.loads(line) for line in out.splitlines()]
    assert [h["host"] for h in table] == sorted(names)
    assert all(h["state"] in STATES and h["delay"] == 0.5 and h["source"] == "delay" for h in table)
    assert sum(h["done"] for h in table) >= 6 and all(h["queued"] >= 0 for h in table)

    rc, out, err = await cli("ctl", "hx", "hosts", "--json", "--sort", "queued", "--limit", "2")
    queued = [json.loads(line)["queued"] for line in out.splitlines()]
    assert rc == 0 and len(queued) == 2 and queued == sorted(queued, reverse=True), (out, err)
    for state in ("waiting", "done"):
        rc, out, err = await cli("ctl", "hx", "hosts", "--json", "--state", state)
        assert rc == 0, err
        assert all(json.loads(line)["state"] == state for line in out.splitlines())

    for args, why in ((("--sort", "speed"), "--sort is one of queued, errors"),
                      (("--state", "asleep"), "--state is one of ready, fetching"),
                      (("extra",), "hosts takes no value")):
        rc, out, err = await cli("ctl", "hx", "hosts", *args)
        assert rc == 2 and why in err and err.count("\n") == 1 and out == "", (args, err)

    # The queues view of an attached monitor: the same rows, pulled over the socket.
    remote = await RemoteCrawler.connect(resolve("hx"))
    app = CrawlApp(remote)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("H")
        await until(pilot, lambda: isinstance(app.screen, QueuesScreen))
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        await until(pilot, lambda: {h.host for h in screen.rows} == names, 10)
        assert screen.note == "" and all(h.state in STATES for h in screen.rows)
        for _ in range(5):
            await pilot.press("o")
        assert screen.sort == "host"
        await until(pilot, lambda: [h.host for h in screen.rows] == sorted(names), 10)
        await until(pilot, lambda: "hosts 3: " in screen.counts.plain, 10)
        await pilot.press("d")  # detach: the crawl goes on
        await until(pilot, lambda: not app.is_running, 5)

    assert (await cli("ctl", "hx", "stop"))[0] == 0
    await wait_gone(s["pid"])


def test_the_hosts_command_takes_optional_arguments() -> None:
    """`hosts` may leave out (or null) its sort, state and limit: the engine's defaults apply."""
    from crawltop.core.errors import ProtocolError
    from crawltop.core.sockets.protocol import check_args

    assert check_args("hosts", None) == {}
    assert check_args("hosts", {"sort": "host", "state": None, "limit": 5}) == {"sort": "host", "limit": 5}
    for bad in ({"limit": "5"}, {"state": 3}, {"sort": "host", "page": 2}):
        with pytest.raises(ProtocolError):
            check_args("hosts", bad)
    with pytest.raises(ProtocolError):  # required arguments stay required elsewhere
        check_args("host_pause", {"host": None})
