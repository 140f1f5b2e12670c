"""Clients of a crawl's control socket: `RemoteCrawler` for the TUI, `Client` for ctl/ls.

The app cannot tell a RemoteCrawler from a local Crawler (ARCHITECTURE.md, "Control"); how
it pulls snapshots and ends: RemoteCrawler's docstring. The messages: core/sockets/protocol.py.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from ... import __version__
from ..errors import CrawlLost, ProtocolError, RemoteError
from ..monitor.stats import HostView, Snapshot
from ..monitor.summary import Summary, of_snapshot
from ..surface import Parts
from .blocking import Client
from .protocol import MAX_REPLY, PROTOCOL, SnapshotDecoder, decode, encode

__all__ = ["Client", "HeldStats", "RemoteCrawler", "RemoteStats"]


class HeldStats:
    """The `stats` of a crawl seen from outside its process: the last snapshot it gave,
    read as a local Crawler's Stats would be (state, pages, errors)."""

    snap: Snapshot

    @property
    def state(self) -> str:
        return self.snap.state

    @property
    def pages(self) -> int:
        return self.snap.pages

    @property
    def errors(self) -> int:
        return self.snap.errors

    def summary(self) -> Summary:
        return of_snapshot(self.snap)


class RemoteStats(HeldStats):
    """The `stats` of a RemoteCrawler: the last snapshot, and the next one asked for."""

    def __init__(self, remote: RemoteCrawler, snap: Snapshot) -> None:
        self._remote = remote
        self.snap = snap
        self.top: list[tuple[str, int]] = []

    def snapshot(self) -> Snapshot:
        self._remote._want_snapshot()
        return self.snap

    def top_error_urls(self, n: int = 10) -> list[tuple[str, int]]:
        return self.top[:n]


class RemoteCrawler:
    """A crawl in another process, steered over its Unix socket.

    A `Monitor` (core/surface.py) with, of the optional parts, the host table and `detach`.
    The app's refresh timer drives it: each stats.snapshot() returns the newest snapshot
    received and asks for the next one, so a monitor pulls at the app's own rate and never
    more than one request is in flight. Commands are written at once from the key handler;
    their replies carry the crawl's new state, which the next frame shows.

    crawl() returns when the crawl ends (the server's bye) or the monitor detaches; if the
    connection drops without a bye, it raises CrawlLost: the crawl process died.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: dict[str, Any],
                 first: dict[str, Any], decoder: SnapshotDecoder, *, workers: int | None = None) -> None:
        self._reader, self._writer = reader, writer
        self._decoder = decoder
        self.hello = hello
        self.name: str = hello["name"]
        self.pid: int = hello["pid"]
        self.roots: list[str] = list(hello["roots"])
        self.config = types.SimpleNamespace(roots=tuple(self.roots))
        self.stats = RemoteStats(self, decoder.decode(first))
        self.paused: bool = hello["paused"]
        self.concurrency: int = hello["concurrency"]
        self.workers = workers
        self.detached = False
        self.ended: str | None = None  # the bye's reason
        self.lost = False  # the connection dropped without a bye: the crawl process died
        self.on_lost: Any = None  # called once if the crawl process dies under us
        self._next_id = 10
        self._pending: dict[int, tuple[str, asyncio.Future[Any] | None]] = {}
        self._snap_pending = False
        # host_table(): the last rows received, for which (sort, state, limit), or why not
        self._hosts: tuple[tuple[Any, ...], list[HostView]] = ((), [])
        self._hosts_error: str | None = None
        self._hosts_pending = False
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader_task = asyncio.create_task(self._read(), name="crawltop-remote")

    @classmethod
    async def connect(cls, path: Path | str, *, workers: int | None = None, timeout: float = 5.0) -> RemoteCrawler:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(path), limit=MAX_REPLY), timeout)
        except (OSError, TimeoutError) as exc:
            raise RemoteError(f"cannot connect to {path}: {exc}") from None
        try:
            hello = await _ask(reader, writer, {"op": "hello", "id": 0, "protocol": PROTOCOL,
                                                "version": __version__, "client": "crawltop attach"}, timeout)
            first = await _ask(reader, writer, {"op": "snapshot", "id": 1, "workers": workers}, timeout)
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, hello, first, SnapshotDecoder(), workers=workers)

    # -- the control surface ------------------------------------------------------------
    @property
    def parts(self) -> Parts:
        return Parts(host_table=self, detach=self)

    def pause(self) -> None:
        self._expect(paused=True, state="PAUSED", only_from="RUNNING")
        self._command("pause")

    def resume(self) -> None:
        self._expect(paused=False, state="RUNNING", only_from="PAUSED")
        self._command("resume")

    def set_concurrency(self, n: int) -> None:
        self._expect(concurrency=n)
        self._command("set_concurrency", n=n)

    def cancel_worker(self, worker_id: int) -> bool:
        """Sent at once; True if that worker was in the last snapshot (the reply confirms)."""
        if not any(w.id == worker_id for w in self.stats.snap.workers):
            return False
        self._expect(concurrency=max(0, self.concurrency - 1))
        self._command("cancel_worker", worker_id=worker_id)
        return True

    def stop(self) -> None:
        if not self.detached and self.ended is None:
            self._command("stop")

    def detach(self) -> None:
        """Leave the crawl running and close this connection."""
        if self.detached:
            return
        self.detached = True
        self._writer.close()
        if not self._done.done():
            self._done.set_result(None)

    async def crawl(self) -> None:
        """Wait for the crawl to end (or this monitor to detach)."""
        await asyncio.shield(self._done)

    async def request(self, op: str, **args: Any) -> Any:
        """A command or query, awaited: its result (RemoteError on an error reply)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send(op, args, fut)
        return await fut

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]:
        """The queues view's rows, pulled as snapshots are: the newest table received and a
        request for the next, so the caller's own timer sets the rate and at most one request
        is in flight. Rows asked for differently than the last reply are re-sorted and filtered
        here until the engine's answer arrives. RemoteError: the crawl cannot answer (an engine
        older than the `hosts` command)."""
        from ..steering.steer import HOST_SORTS, STATES  # the engine's own checks, before a round trip

        if sort not in HOST_SORTS:
            raise ValueError(f"sort by one of {', '.join(HOST_SORTS)}, not {sort!r}")
        if state is not None and state not in STATES:
            raise ValueError(f"a host state is one of {', '.join(STATES)}, not {state!r}")
        if self._hosts_error is not None:
            raise RemoteError(self._hosts_error)
        wanted = (sort, state, limit)
        if not self._hosts_pending and not self.detached and self.ended is None:
            self._hosts_pending = True
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.add_done_callback(lambda f: self._got_hosts(wanted, f))
            args: dict[str, Any] = {"sort": sort}
            if state is not None:
                args["state"] = state
            if limit is not None:
                args["limit"] = limit
            self._send("hosts", args, fut)
        got, rows = self._hosts
        if got == wanted:
            return rows
        if state is not None:
            rows = [r for r in rows if r.state == state]
        key, reverse = HOST_SORTS[sort]
        return sorted(rows, key=key, reverse=reverse)[:limit]

    def _got_hosts(self, wanted: tuple[Any, ...], fut: asyncio.Future[Any]) -> None:
        self._hosts_pending = False
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            if "unknown command" in str(exc):  # an older engine: asking again will not help
                self._hosts_error = f"this crawl's engine has no host table ({exc})"
            return
        rows = fut.result() or []
        self._hosts = (wanted, [_host_row(r) for r in rows if isinstance(r, dict)])

    def _expect(self, *, paused: bool | None = None, state: str | None = None, only_from: str = "",
                concurrency: int | None = None) -> None:
        """Show a command's effect at once, as a local crawler would; the reply confirms it
        (and a frame that shows the same thing twice costs no Footer recompose)."""
        snap = self.stats.snap
        if state is not None and snap.state == only_from:
            self.paused = bool(paused)
            snap = dataclasses.replace(snap, state=state)
        if concurrency is not None:
            self.concurrency = concurrency
            snap = dataclasses.replace(snap, concurrency=concurrency)
        self.stats.snap = snap

    # -- the wire -----------------------------------------------------------------------
    def _command(self, op: str, **args: Any) -> None:
        self._send(op, args, None)

    def _send(self, op: str, args: dict[str, Any], fut: asyncio.Future[Any] | None) -> None:
        if self.detached or self._writer.is_closing():
            if fut is not None:
                fut.set_exception(RemoteError("not connected"))
            return
        self._next_id += 1
        self._pending[self._next_id] = (op, fut)
        message: dict[str, Any] = {"op": op, "id": self._next_id}
        if op == "snapshot":
            message.update(args)
        elif args:
            message["args"] = args
        self._writer.write(encode(message))

    def _want_snapshot(self) -> None:
        if not self._snap_pending and not self.detached and self.ended is None:
            self._snap_pending = True
            self._send("snapshot", {"since": self._decoder.since(), "workers": self.workers}, None)

    async def _read(self) -> None:
        try:
            await pump(self._reader, self._receive, lambda: self.ended is not None)
        finally:
            self._writer.close()
            for _, fut in self._pending.values():
                if fut is not None and not fut.done():
                    fut.set_exception(RemoteError("connection closed"))
            self._pending.clear()
            if not self._done.done():
                if self.ended is not None or self.detached:
                    self._done.set_result(None)
                else:
                    self.lost = True
                    self._done.set_exception(CrawlLost(
                        f"the crawl {self.name!r} (pid {self.pid}) went away without finishing: "
                        "its process was killed or crashed"))
                    self._done.exception()  # retrieved: crawl() re-raises it for whoever awaits
                    if self.on_lost is not None:
                        self.on_lost()

    def _receive(self, message: dict[str, Any]) -> None:
        if message.get("event") == "bye":
            self.stats.snap = self._decoder.decode(message["snapshot"])
            self.stats.top = [(u, n) for u, n in message.get("top_error_urls", [])]
            self.paused = False
            self.ended = str(message.get("reason", "ended"))
            return
        # an id that is missing or not ours pops the default: a reply nobody waits for
        op, fut = self._pending.pop(message.get("id"), ("", None))  # type: ignore[arg-type]
        if not message.get("ok"):
            if op == "snapshot":
                self._snap_pending = False
            if fut is not None:
                fut.set_exception(RemoteError(str(message.get("error"))))
            return
        result = message.get("result")
        if op == "snapshot":
            self._snap_pending = False
            snap = self._decoder.decode(cast(dict[str, Any], result))  # a snapshot reply is an object
            self.stats.snap = snap
            self.paused = snap.state == "PAUSED"
            self.concurrency = snap.concurrency
        elif isinstance(result, dict) and "state" in result:
            self.paused = bool(result["paused"])
            self.concurrency = int(result["concurrency"])
            self.stats.snap = dataclasses.replace(self.stats.snap, state=result["state"],
                                                  concurrency=self.concurrency)
            result = result.get("result")
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def close(self) -> None:
        self.detach()
        self._reader_task.cancel()
        with contextlib.suppress(BaseException):
            await self._reader_task


async def pump(reader: asyncio.StreamReader, receive: Callable[[dict[str, Any]], None],
               done: Callable[[], bool]) -> None:
    """Hand each reply line to `receive` until the connection ends (a partial line, an
    error, garbage) or `done()` says so (a bye): the read loop of every async client."""
    try:
        while True:
            line = await reader.readline()
            if not line or not line.endswith(b"\n"):
                return
            receive(decode(line))
            if done():
                return
    except (OSError, ValueError, ProtocolError):
        return


def _host_row(data: dict[str, Any]) -> HostView:
    """A HostView from its wire form; fields this side lacks are left out, missing ones
    keep their defaults (an engine a version apart still shows its rows)."""
    names = {f.name for f in dataclasses.fields(HostView)}
    return HostView(**{k: v for k, v in data.items() if k in names})


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, message: dict[str, Any],
               timeout: float) -> Any:
    writer.write(encode(message))
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, ValueError, TimeoutError) as exc:
        raise RemoteError(f"no answer from the crawl: {exc or 'timed out'}") from None
    if not line:
        raise RemoteError("the crawl closed the connection")
    reply = decode(line)
    if not reply.get("ok"):
        raise RemoteError(str(reply.get("error")))
    return reply.get("result")
