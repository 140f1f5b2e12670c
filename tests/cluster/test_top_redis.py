"""`crawltop --redis URL` lists the crawls shared through that Redis beside the
local ones, and its keys steer the whole shared crawl. A real redis-server, a real engine
process joined to it (detached), the dashboard under Pilot."""
from __future__ import annotations

from pathlib import Path

import pytest
from support.ctl import cli, wait_gone, wait_status
from support.wait import until

from crawltop.core.cluster.keys import Keys
from crawltop.core.dashboard.board import Board
from crawltop.tui.top.app import TopApp

pytestmark = pytest.mark.timeout(120)


async def test_shared_crawl_is_a_row_and_its_keys_steer_it(site: str, rundir: Path, redis_url: str) -> None:
    rc, out, err = await cli("crawl", site, "--redis", redis_url, "--name", "shared", "-c", "2", "--no-robots",
                             "--detach")
    assert rc == 0, err
    local = out.strip()  # the engine's own socket, named after the crawl
    pid = (await wait_status(local, lambda s: s["pages"] > 3))["pid"]
    board = Board(redis_url)
    app = TopApp(board, cwd=rundir)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: "shared@redis" in board.rows and board.rows["shared@redis"].summary is not None
                        and board.rows["shared@redis"].summary.pages > 3, 30)
            assert local in board.rows  # the engine process is listed too, by its socket
            row = app.table.line_of("shared@redis")
            assert "RUNNING" in row and site.rstrip("/").rsplit(":", 1)[1] in row
            app.table.move_cursor(row=app.table.get_row_index("shared@redis"))
            await pilot.pause(0.05)
            assert app.check_action("ignore", ()) is False  # a shared crawl's ignores are in its monitor
            await pilot.press("p")  # the whole shared crawl pauses: its control hash, obeyed by the engine
            await wait_status(local, lambda s: s["state"] == "PAUSED", 20)
            await until(pilot, lambda: "PAUSED" in app.table.line_of("shared@redis"), 10)
            await pilot.press("p")
            await wait_status(local, lambda s: s["state"] == "RUNNING", 20)
            await pilot.press("k", "y")  # stop, after a yes
            await until(pilot, lambda: board.rows["shared@redis"].how == "stopped", 30)
            assert "stopped" in app.table.line_of("shared@redis")
    finally:
        await board.close()
    await wait_gone(pid, 60)  # the stop reached the engine: it finished and exited
    import redis

    r = redis.Redis.from_url(redis_url)
    try:
        assert r.hget(Keys("shared").meta, "status") == b"stopped"
    finally:
        r.close()


async def test_bad_data_in_redis_marks_its_row_and_spares_the_others(rundir: Path, redis_url: str) -> None:
    """A crawl's rows in a real Redis not in the shape engines write (a null process row, a
    non-numeric count): that crawl's row says "bad data", the good one beside it shows its numbers."""
    import json
    import time

    import redis.asyncio as aioredis

    r = aioredis.Redis.from_url(redis_url)
    meta = {"status": "running", "roots": json.dumps(["http://127.0.0.1:9/"]), "created": str(time.time())}
    good = json.dumps({"host": "h", "pid": 1, "state": "RUNNING", "workers": 2, "busy": 1, "pages": 42, "rate": 1.0})
    for name, procs in (("nullrow", {"p1": "null"}), ("nonnum", {"p1": json.dumps({"pages": "many"})}),
                        ("fine", {"p1": good})):
        k = Keys(name)
        await r.hset(k.meta, mapping=meta)
        await r.hset(k.procs, mapping=procs)
    await r.hset(Keys("fine").count, mapping={"records": "x"})  # a non-numeric count: bad too
    await r.hset(Keys("fine2").meta, mapping=meta)
    await r.hset(Keys("fine2").procs, mapping={"p1": good})
    board = Board(redis_url)
    try:
        await board.tick()
        assert board.redis_problem == ""
        for name in ("nullrow", "nonnum", "fine"):
            assert board.rows[f"{name}@redis"].state == "bad data", name
        assert board.rows["fine2@redis"].state == "RUNNING"
        assert board.rows["fine2@redis"].summary is not None and board.rows["fine2@redis"].summary.pages == 42
    finally:
        await board.close()
        await r.aclose()
