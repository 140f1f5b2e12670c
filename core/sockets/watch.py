"""One crawl as the dashboard watches it: a connection to its socket that asks
for summaries (O(1), core/monitor/summary.py), never snapshots, and carries the keys'
commands.

`ask()` writes a summary request if none is in flight and returns at once; the reply
lands in `summary` when it comes, so the dashboard's timer sets the rate and a slow crawl
costs it nothing but a stale row. The crawl's bye (it ended) or a dropped connection
without one (its process died: `lost`) is noted here; the board decides what to show.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from ... import __version__
from ..errors import ProtocolError, RemoteError
from ..monitor.summary import Summary, from_wire, of_snapshot
from .client import pump
from .protocol import MAX_REPLY, PROTOCOL, SnapshotDecoder, decode, encode

CLIENT = "crawltop top"
REQUEST_TIMEOUT = 5.0  # seconds a command, or a summary, may take: then the crawl is "not answering"


class Link:
    """A connection to one crawl's control socket."""

    def __init__(self, path: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 hello: dict[str, Any]) -> None:
        self.path = path
        self.name: str = str(hello.get("name", path.name))
        self.pid: int = int(hello.get("pid", 0))
        self.started: float = float(hello.get("started", 0.0))
        roots = hello.get("roots") or [""]
        self.root: str = str(roots[0])
        self.paused: bool = bool(hello.get("paused"))
        self.mode = ""
        self.summary: Summary | None = None
        self.ended: str | None = None  # the bye's reason: "ended" | "failed"
        self.lost = False  # the connection dropped without a bye
        self.summaries = 0  # replies received (the benchmark and tests read it)
        self.asked = 0.0  # when the board last asked (its clock): rows off the screen are asked less
        self._reader, self._writer = reader, writer
        self._next = 0
        self._pending: dict[int, tuple[str, asyncio.Future[Any] | None]] = {}
        self._asking = False
        self._asked_at = 0.0  # (monotonic) when the summary request in flight was written
        self._op = "summary"  # "status" for an engine older than the summary request (its fields suffice)
        self._task = asyncio.create_task(self._read(), name=f"crawltop-watch-{self.name}")

    @classmethod
    async def open(cls, path: Path, *, timeout: float = 2.0) -> Link:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path), limit=MAX_REPLY), timeout)
        except (OSError, TimeoutError) as exc:
            raise RemoteError(f"cannot connect to {path}: {exc}") from None
        try:
            writer.write(encode({"op": "hello", "id": 0, "protocol": PROTOCOL, "version": __version__,
                                 "client": CLIENT}))
            line = await asyncio.wait_for(reader.readline(), timeout)
            reply = decode(line) if line else {}
            if not reply.get("ok"):
                raise RemoteError(str(reply.get("error") or "the crawl closed the connection"))
        except (OSError, TimeoutError, ProtocolError) as exc:
            writer.close()
            raise RemoteError(f"no answer from {path.name}: {exc or 'timed out'}") from None
        except BaseException:
            writer.close()
            raise
        return cls(path, reader, writer, reply["result"])

    @property
    def connected(self) -> bool:
        return self.ended is None and not self.lost and not self._writer.is_closing()

    def ask(self) -> None:
        """A summary request, unless one is still in flight."""
        if not self._asking and self.connected:
            self._asking = True
            self._asked_at = time.monotonic()
            self._send(self._op, {}, None)

    @property
    def answering(self) -> bool:
        """False while a summary request has waited REQUEST_TIMEOUT or more (a stopped or hung
        crawl: its socket accepts, nobody reads). Its reply, when it comes, clears this."""
        return not self._asking or time.monotonic() - self._asked_at < REQUEST_TIMEOUT

    async def request(self, op: str, **args: Any) -> Any:
        """A command, awaited: its result; RemoteError on an error reply, a closed link or no
        reply within REQUEST_TIMEOUT. (asyncio.timeout, not wait_for: on 3.11 wait_for can
        swallow a cancel that comes as the future completes.)"""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send(op, args, fut)
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                return await fut
        except TimeoutError:
            raise RemoteError(f"{self.name} is not answering (no reply in {REQUEST_TIMEOUT:g} s)") from None

    def _send(self, op: str, args: dict[str, Any], fut: asyncio.Future[Any] | None) -> None:
        if not self.connected:
            if fut is not None:
                fut.set_exception(RemoteError(f"{self.name} is not connected"))
            return
        self._next += 1
        self._pending[self._next] = (op, fut)
        message: dict[str, Any] = {"op": op, "id": self._next}
        if args:
            message["args"] = args
        self._writer.write(encode(message))

    async def _read(self) -> None:
        try:
            await pump(self._reader, self._receive, lambda: self.ended is not None)
        finally:
            self._writer.close()
            if self.ended is None:
                self.lost = True
            for _, fut in self._pending.values():
                if fut is not None and not fut.done():
                    fut.set_exception(RemoteError("connection closed"))
            self._pending.clear()

    def _receive(self, message: dict[str, Any]) -> None:
        if message.get("event") == "bye":
            with contextlib.suppress(Exception):  # the final numbers, as a summary
                self.summary = of_snapshot(SnapshotDecoder().decode(message["snapshot"]))
            self.ended = str(message.get("reason", "ended"))
            return
        op, fut = self._pending.pop(message.get("id"), ("", None))  # type: ignore[arg-type]
        if op in ("summary", "status"):
            self._asking = False
            if not message.get("ok") and "unknown command" in str(message.get("error")):
                self._op = "status"  # an older engine: its status carries a summary's fields
        if not message.get("ok"):
            if fut is not None and not fut.done():  # (done: it timed out, the reply came late)
                fut.set_exception(RemoteError(str(message.get("error"))))
            return
        result = message.get("result")
        if op in ("summary", "status") and isinstance(result, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.summary = from_wire(result)
                self.summaries += 1
            self.paused = bool(result.get("paused", self.paused))
            self.mode = str(result.get("mode", ""))
        elif isinstance(result, dict) and "state" in result:
            self.paused = bool(result.get("paused"))
            result = result.get("result")
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def close(self) -> None:
        self._writer.close()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
