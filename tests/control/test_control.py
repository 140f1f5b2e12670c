"""The control protocol and server: the codec, and every kind of hostile client, against
a real crawl process over its real socket. The crawl must go on through all of it."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
from pathlib import Path

import pytest
from support.ctl import cli, status, wait_gone, wait_status
from support.frozen import sample_snapshot
from support.wait import wait_until

from crawltop.core.monitor.stats import Snapshot, WorkerView
from crawltop.core.sockets.protocol import MAX_REQUEST, PROTOCOL, SnapshotDecoder, encode, encode_snapshot, rings

pytestmark = pytest.mark.timeout(120)


def test_codec_round_trip_is_exact_and_generic() -> None:
    snap = sample_snapshot("RUNNING")
    snap = dataclasses.replace(snap, elapsed=round(snap.elapsed, 3), rate_now=round(snap.rate_now, 3),
                               rate_avg=round(snap.rate_avg, 3))
    wire = json.loads(encode({"r": encode_snapshot(snap)}))["r"]
    back = SnapshotDecoder().decode(wire)
    # floats go to the millisecond; everything else is exact, dict keys typed back
    assert back.statuses == snap.statuses and all(isinstance(k, int) for k in back.statuses)
    assert back.workers[0] == dataclasses.replace(snap.workers[0], in_phase=round(snap.workers[0].in_phase, 3))
    assert back.recent_errors == snap.recent_errors and back.hosts[0].host == snap.hosts[0].host
    assert {f.name for f in dataclasses.fields(Snapshot)} <= set(wire)  # every field, by name
    assert set(rings()) == {"recent_errors", "recent_merges", "recent_redirects"}


def test_rings_travel_incrementally() -> None:
    snap = sample_snapshot("RUNNING")
    dec = SnapshotDecoder()
    first = dec.decode(encode_snapshot(snap))
    n = len(first.recent_errors)
    assert n > 2
    since = dec.since()
    again = encode_snapshot(snap, since)
    assert again["recent_errors"] == [] or again["recent_errors"]["r"] == []  # nothing new
    assert dec.decode(again).recent_errors == first.recent_errors  # the client kept its copy
    newer = dataclasses.replace(snap.recent_errors[-1], seq=snap.recent_errors[-1].seq + 1)
    snap2 = dataclasses.replace(snap, recent_errors=snap.recent_errors + (newer,))
    third = dec.decode(encode_snapshot(snap2, dec.since()))
    assert third.recent_errors[-1] == newer and len(third.recent_errors) == n + 1


def test_two_hundred_workers_stay_under_100_kb_per_second_at_4_hz() -> None:
    snap = sample_snapshot("RUNNING")
    workers = tuple(WorkerView(i, "reading",
                               f"http://www.example-shop.com/products/category-{i % 17}/item-{i * 7919}.html",
                               "www.example-shop.com", 0.123456 + i, 1, False) for i in range(1, 201))
    snap = dataclasses.replace(snap, workers=workers)
    dec = SnapshotDecoder()
    dec.decode(encode_snapshot(snap))  # the first one carries the rings
    steady = len(encode({"id": 9, "ok": True, "result": encode_snapshot(snap, dec.since())}))
    assert steady * 4 < 100_000, steady


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def _conn(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(path), limit=16 * 1024 * 1024)


async def _ask(r, w, message: dict) -> dict:
    w.write(encode(message))
    return json.loads(await asyncio.wait_for(r.readline(), 5))


async def _hello(r, w) -> dict:
    reply = await _ask(r, w, {"op": "hello", "id": 0, "protocol": PROTOCOL})
    assert reply["ok"], reply
    return reply["result"]


async def test_hostile_clients_get_an_error_or_the_door(site: str, rundir: Path) -> None:
    rc, out, err = await cli("crawl", site, "--detach", "--name", "h", "-c", "16", "--no-robots")
    assert rc == 0, err
    path = rundir / "h"
    pid = (await status("h"))["pid"]

    # garbage, then a proper hello on the same connection; wrong protocol; unknown command; bad args
    r, w = await _conn(path)
    reply = await _ask(r, w, {"op": "snapshot", "id": 1})
    assert not reply["ok"] and "hello first" in reply["error"]
    w.write(b"\x00\xffthis is not json\n")
    reply = json.loads(await r.readline())
    assert not reply["ok"] and "not a JSON line" in reply["error"]
    w.write(b"[1, 2, 3]\n")
    assert "must be a JSON object" in json.loads(await r.readline())["error"]
    reply = await _ask(r, w, {"op": "hello", "id": 2, "protocol": 99})
    assert not reply["ok"] and "protocol 99" in reply["error"]
    hello = await _hello(r, w)
    assert hello["name"] == "h" and hello["pid"] == pid and hello["protocol"] == PROTOCOL
    assert "pause" in hello["commands"] and "version" in hello
    reply = await _ask(r, w, {"op": "self_destruct", "id": 3})
    assert not reply["ok"] and reply["id"] == 3 and "unknown command" in reply["error"]
    reply = await _ask(r, w, {"op": "set_concurrency", "id": 4, "args": {"n": "ten"}})
    assert not reply["ok"] and "must be int" in reply["error"]
    reply = await _ask(r, w, {"op": "set_concurrency", "id": 5, "args": {"n": 4, "x": 1}})
    assert not reply["ok"] and "unexpected argument" in reply["error"]
    reply = await _ask(r, w, {"op": "snapshot", "id": 6, "since": "yesterday"})
    assert not reply["ok"]
    reply = await _ask(r, w, {"op": "status", "id": 7})
    assert reply["ok"] and reply["result"]["state"] == "RUNNING"
    # too many bad messages: the door
    for _ in range(25):
        w.write(b"nope\n")
    replies = 0
    try:
        while await asyncio.wait_for(r.readline(), 5):
            replies += 1
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed with our surplus lines unread: a reset (or our writes' broken pipe), as good as an EOF
    assert replies <= 22
    w.close()

    # truncated: half a message, then the client hangs up its side
    r, w = await _conn(path)
    await _hello(r, w)
    w.write(b'{"op": "sta')
    w.write_eof()
    reply = json.loads(await asyncio.wait_for(r.readline(), 5))
    assert not reply["ok"] and "truncated" in reply["error"]
    assert await r.readline() == b""
    w.close()

    # oversized: 100 KB with no newline
    r, w = await _conn(path)
    await _hello(r, w)
    w.write(b'{"op": "status", "pad": "' + b"x" * (MAX_REQUEST + 40_000))
    reply = json.loads(await asyncio.wait_for(r.readline(), 5))
    assert not reply["ok"] and "over" in reply["error"]
    assert await asyncio.wait_for(r.read(), 5) == b""
    w.close()

    # connects and never says anything: dropped after the hello timeout
    r, w = await _conn(path)
    reply = json.loads(await asyncio.wait_for(r.readline(), 10))
    assert reply["error"] == "no hello"
    w.close()

    before = (await status("h"))["pages"]

    # asks and asks and never reads (a raw socket that never calls recv): dropped once its
    # unread replies pass the cap, while the crawl's memory stays put
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(str(path))
    raw.sendall(encode({"op": "hello", "id": 0, "protocol": PROTOCOL}))
    raw.setblocking(False)
    rss = _rss(pid)
    request = encode({"op": "snapshot", "id": 1}) * 10

    def offer() -> bool:  # 10 requests every 50 ms: up to 200 requests/s offered, until dropped
        try:
            raw.send(request)
        except BlockingIOError:
            pass  # the server reads at its own pace (RATE per connection)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return False

    await wait_until(offer, 30, interval=0.05, what="the server dropping a client that does not read")
    raw.close()
    assert _rss(pid) < rss + 30_000_000

    # a hundred clients at once, each answered
    async def one(i: int) -> int:
        r, w = await _conn(path)
        try:
            await _hello(r, w)
            reply = await _ask(r, w, {"op": "status", "id": i})
            return reply["result"]["pages"]
        finally:
            w.close()

    conns = await asyncio.gather(*(one(i) for i in range(100)))
    assert len(conns) == 100 and min(conns) >= before

    # ... and through all of it the crawl went on
    s = await wait_status("h", lambda s: s["pages"] > before + 10, 20)
    assert s["state"] == "RUNNING" and s["clients"] == 0  # ctl itself is not a client
    assert (await cli("ctl", "h", "stop"))[0] == 0
    await wait_gone(pid)


async def test_socket_and_dir_modes(site: str, rundir: Path) -> None:
    rc, out, err = await cli("crawl", site, "--detach", "--name", "m", "-c", "2", "--no-robots")
    assert rc == 0, err
    st = os.stat(rundir / "m")
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid()
    assert os.stat(rundir).st_mode & 0o777 == 0o700
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(rundir / "m"))
    s.close()
    pid = (await status("m"))["pid"]
    assert (await cli("ctl", "m", "stop"))[0] == 0
    await wait_gone(pid)
