"""The control server: a crawl's Unix socket, served on the engine's own loop.

Monitors pull snapshots and send commands (core/sockets/protocol.py). The engine never waits for
a monitor: replies are written without awaiting drain(), and a client whose unread
replies pass MAX_BUFFERED bytes is dropped. Every other hostile case is bounded too:
a message over 64 KiB or a truncated one closes the connection, garbage and unknown
commands get an error reply (and too many of them a disconnect), a client that says
no hello within HELLO_TIMEOUT is dropped, each connection is held to RATE requests a
second (its socket simply stops being read), and at most MAX_CLIENTS connect at once.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from ... import __version__
from ..errors import ProtocolError, describe
from ..monitor.sanitize import clean
from ..monitor.stats import Snapshot
from ..monitor.summary import to_wire
from ..queueing.frontier import MemoryFrontier
from ..surface import Engine, HasRoots, MonitorStats, Parts
from .ended import write as write_ended
from .protocol import COMMANDS, MAX_REQUEST, PROTOCOL, check_args, decode, encode, encode_snapshot, headline

MAX_CLIENTS = 256
MAX_BUFFERED = 256 * 1024  # unread reply bytes per client; one larger reply still goes
MAX_ERRORS = 20
HELLO_TIMEOUT = 5.0
RATE = 50.0  # requests per second per connection, sustained
BYE_TIMEOUT = 2.0  # at the end, how long a slow monitor may take to read its bye
SNAPSHOT_TTL = 0.02  # monitors asking within 20 ms share one Stats.snapshot()


class ControlServer:
    """Serves one crawler on an already bound socket (core/sockets/rundir.py claim)."""

    def __init__(self, crawler: Engine, name: str, path: Path, sock: socket.socket) -> None:
        self.crawler = crawler
        self.name = name
        self.path = path
        self.sock = sock
        self.started = time.time()
        self.mode = "headless"  # tui | headless | detached | stopping (the CLI sets it; `ls` shows it)
        self._inode = os.stat(path).st_ino  # unlink only our own socket, not a successor's
        self.clients: set[asyncio.StreamWriter] = set()
        self.dropped = 0  # clients disconnected for misbehaving (tests read it)
        self.requests = 0  # requests answered, and reply bytes written (the benchmark reads them)
        self.bytes_out = 0
        self._server: asyncio.AbstractServer | None = None
        self._snap: Snapshot | None = None
        self._snap_at = 0.0
        self.stopped_by: str | None = None  # who asked for the stop: the ended summary says (core/sockets/ended.py)

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, sock=self.sock, limit=MAX_REQUEST)

    async def close(self, reason: str = "ended") -> None:
        """Say bye (with the final snapshot) to every client, then stop listening."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        self._leave_summary(reason)
        snap = self.crawler.stats.snapshot()
        bye = {"event": "bye", "reason": reason, "snapshot": encode_snapshot(snap),
               "top_error_urls": self.crawler.stats.top_error_urls(10)}
        data = encode(bye)
        writers = list(self.clients)
        for writer in writers:
            # The last message is never dropped for a backlog, and the connection is only
            # half-closed after it: a monitor that sends a request meanwhile (its next
            # snapshot) must not get EPIPE, which makes asyncio drop the bye still unread in
            # its socket (seen under load: a clean stop shown as "the crawl went away").
            # The client closes when it has read the bye; BYE_TIMEOUT bounds the wait.
            if not writer.transport.is_closing():
                writer.write(data)
                self.bytes_out += len(data)
                if writer.can_write_eof():
                    writer.write_eof()
                    continue
            writer.close()
        if writers:  # let the byes reach their monitors before this process may exit
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*(w.wait_closed() for w in writers),
                                                      return_exceptions=True), BYE_TIMEOUT)
        for writer in writers:
            writer.close()
        self.clients.clear()

    def _leave_summary(self, reason: str) -> None:
        """The crawl's epitaph in the run directory, for dashboards that were not watching."""
        summary = self.crawler.stats.summary()
        if reason != "ended":
            how = "crashed"  # not "failed": that word is the outcome of URLs that could not be fetched
        elif self.stopped_by is not None:
            how = "stopped"
        else:
            how = "done"
        write_ended(self.name, {"name": self.name, "pid": os.getpid(), "started": self.started,
                                "ended": time.time(), "root": self.crawler.roots[0], "how": how,
                                "by": self.stopped_by or "", "summary": to_wire(summary)})

    # -- one connection ---------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.clients) >= MAX_CLIENTS or self._server is None:
            self._write(writer, encode({"id": None, "ok": False, "error": "too many clients"}))
            writer.close()
            return
        self.clients.add(writer)
        errors = 0
        greeted = False
        who = "a monitor"  # what the client called itself in its hello (a stop is put to its name)
        tokens, last = RATE, time.monotonic()
        try:
            while True:
                try:
                    read = reader.readline()
                    line = await (read if greeted else asyncio.wait_for(read, HELLO_TIMEOUT))
                except (ValueError, asyncio.LimitOverrunError):
                    self._drop(writer, f"message over {MAX_REQUEST} bytes")
                    return
                except TimeoutError:
                    self._drop(writer, "no hello")
                    return
                if not line:
                    return  # the client went away
                if self._server is None:
                    continue  # closing: the bye is sent; what the client still says is read, not answered
                if not line.endswith(b"\n"):
                    self._drop(writer, "truncated message")
                    return
                rid = None
                try:
                    message = decode(line)
                    rid = message.get("id")
                    if not greeted:
                        result = self._hello(message)
                        greeted = True
                        who = _client_name(message.get("client"), who)
                    else:
                        result = self._handle(message, who)
                        if isinstance(result, dict) and inspect.isawaitable(result.get("result")):
                            result["result"] = _plain(await result["result"])  # add_ignore
                        elif isinstance(result, dict) and "result" in result:
                            result["result"] = _plain(result["result"])
                    reply = {"id": rid, "ok": True, "result": result}
                except ProtocolError as exc:
                    errors += 1
                    reply = {"id": rid, "ok": False, "error": str(exc)}
                except Exception as exc:  # a command that raised: say so, keep serving
                    errors += 1
                    reply = {"id": rid, "ok": False, "error": describe(exc)}
                try:
                    data = encode(reply)
                except (TypeError, ValueError):  # an id that does not encode back
                    data = encode({"id": None, "ok": False, "error": "bad id"})
                self.requests += 1
                if not self._write(writer, data):
                    return
                if errors > MAX_ERRORS:
                    self._drop(writer, "too many bad messages")
                    return
                # A token bucket: a flooding client waits here, its socket unread, not the crawl.
                now = time.monotonic()
                tokens = min(RATE, tokens + (now - last) * RATE) - 1
                last = now
                if tokens < 0:
                    await asyncio.sleep(-tokens / RATE)
        except (ConnectionError, OSError):
            return
        finally:
            self.clients.discard(writer)
            writer.close()

    def _write(self, writer: asyncio.StreamWriter, data: bytes) -> bool:
        """Queue bytes for a client without waiting; drop it if it stopped reading."""
        transport = writer.transport
        if transport.is_closing():
            return False
        if transport.get_write_buffer_size() > MAX_BUFFERED:
            self.dropped += 1
            transport.abort()
            return False
        writer.write(data)
        self.bytes_out += len(data)
        return True

    def _drop(self, writer: asyncio.StreamWriter, why: str) -> None:
        self.dropped += 1
        self._write(writer, encode({"id": None, "ok": False, "error": why}))
        writer.close()

    # -- requests -----------------------------------------------------------------------
    def _hello(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("op") != "hello":
            raise ProtocolError(f"say hello first: {{\"op\": \"hello\", \"protocol\": {PROTOCOL}}}")
        if message.get("protocol") != PROTOCOL:
            raise ProtocolError(f"protocol {message.get('protocol')!r} not spoken here (this crawl speaks {PROTOCOL})")
        return {"protocol": PROTOCOL, "version": __version__, "name": self.name, "pid": os.getpid(),
                "started": self.started, "roots": list(self.crawler.roots), "commands": sorted(COMMANDS),
                "state": self.crawler.stats.state, "paused": self.crawler.paused,
                "concurrency": self.crawler.concurrency}

    def _snapshot(self) -> Snapshot:
        now = time.monotonic()
        if self._snap is None or now - self._snap_at > SNAPSHOT_TTL:
            self._snap, self._snap_at = self.crawler.stats.snapshot(), now
        return self._snap

    def _handle(self, message: dict[str, Any], who: str = "a monitor") -> Any:
        op = message.get("op")
        if op == "snapshot":
            since = message.get("since") or {}
            workers = message.get("workers")
            if not isinstance(since, dict) or not all(isinstance(v, int) for v in since.values()):
                raise ProtocolError("snapshot: since must map ring names to ints")
            if workers is not None and type(workers) is not int:
                raise ProtocolError("snapshot: workers must be an int")
            return encode_snapshot(self._snapshot(), since, workers)
        if op == "status":
            out = headline(self._snapshot(), self.crawler.paused)
            # keeps_queue: a stop keeps the queued URLs (a state file, Redis) rather than cancel them
            keeps = not isinstance(getattr(self.crawler, "frontier", None), MemoryFrontier)
            out.update(name=self.name, pid=os.getpid(), started=self.started, root=self.crawler.roots[0],
                       keeps_queue=keeps,
                       clients=max(0, len(self.clients) - 1), mode=self.mode)  # not the asker
            return out
        if op == "summary":  # O(1): the dashboard's row (core/monitor/summary.py)
            out = to_wire(self.crawler.stats.summary())
            out.update(name=self.name, pid=os.getpid(), started=self.started, root=self.crawler.roots[0],
                       paused=self.crawler.paused, mode=self.mode)
            return out
        if op == "hello":
            raise ProtocolError("hello twice")
        if not isinstance(op, str):
            raise ProtocolError("a request needs an op")
        args = check_args(op, message.get("args"))
        target: Any = self.crawler
        for part in COMMANDS[op].target.split("."):
            target = getattr(target, part)
            if target is None:  # a part this crawl declares it has not (core/surface.py Parts)
                raise ProtocolError(f"{op}: not available in this crawl")
        result = target(**args)
        if op == "stop" and self.stopped_by is None:
            self.stopped_by = who
        if COMMANDS[op].steers:
            self._snap = None  # the next snapshot shows the effect
        return {"result": result, "state": self.crawler.stats.state, "paused": self.crawler.paused,
                "concurrency": self.crawler.concurrency}


E = TypeVar("E", bound=Engine)


class Listening(Generic[E]):
    """A crawler whose crawl() also serves its control socket for as long as it runs.

    The rest of the control surface is the engine's (core/surface.py `Engine`), passed
    on member by member, so the TUI, the headless runner and the reports take it in
    place of the Crawler; `engine` is the crawler itself."""

    def __init__(self, crawler: E, name: str, path: Path, sock: socket.socket,
                 on_listening: Callable[[str], None] | None = None) -> None:
        self.engine = crawler
        self.control = ControlServer(crawler, name, path, sock)
        self._on_listening = on_listening

    @property
    def stats(self) -> MonitorStats:
        return self.engine.stats

    @property
    def paused(self) -> bool:
        return self.engine.paused

    @property
    def concurrency(self) -> int:
        return self.engine.concurrency

    @property
    def config(self) -> HasRoots:
        return self.engine.config

    @property
    def roots(self) -> Sequence[str]:
        return self.engine.roots

    @property
    def parts(self) -> Parts:
        return self.engine.parts

    def pause(self) -> None:
        self.engine.pause()

    def resume(self) -> None:
        self.engine.resume()

    def set_concurrency(self, n: int) -> None:
        self.engine.set_concurrency(n)

    def cancel_worker(self, worker_id: int) -> bool:
        return self.engine.cancel_worker(worker_id)

    def stop(self) -> None:
        """Stopped from this process: its screen's quit, or a signal (cli/headless.py says which)."""
        if self.control.stopped_by is None:
            self.control.stopped_by = "its screen"
        self.engine.stop()

    def stop_by(self, who: str) -> None:
        if self.control.stopped_by is None:
            self.control.stopped_by = who
        self.engine.stop()

    async def crawl(self) -> None:
        await self.control.start()
        if self._on_listening is not None:
            self._on_listening(self.control.name)
        reason = "failed"
        try:
            await self.engine.crawl()
            reason = "ended"
        finally:
            await self.control.close(reason)


def _client_name(value: Any, default: str) -> str:
    """A hello's `client` (who is asking: "crawltop ctl", "crawltop top"), short and printable."""
    if not isinstance(value, str) or not value.strip():
        return default
    return clean(value.strip(), 40)


def _plain(value: Any) -> Any:
    """Command results as JSON: a dataclass (IgnoreResult, SeedResult) as an object of its
    fields, a tuple or list of them as a list."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value
