"""A real forward HTTP proxy for the tests of `--proxy`: asyncio streams, no mock.

It takes absolute-form requests (`GET http://host:port/path HTTP/1.1`) and CONNECT
tunnels (https targets), checks
Proxy-Authorization when it has a password, forwards the request to the origin with
its own connection, and relays the answer with `Connection: close`. Each request it
served is kept in `seen`: (absolute URL, the headers it got)."""
from __future__ import annotations

import asyncio
import base64
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, user: str | None = None, password: str | None = None) -> None:
        self.auth = ("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()) if user else None
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.refused = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            pairs = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]
            headers = {k.lower(): v for k, v in pairs}
            if self.auth and headers.get("proxy-authorization") != self.auth:
                self.refused += 1
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n"
                             b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                return
            self.seen.append((target, headers))
            if method == "CONNECT":  # an https target: a tunnel, the proxy sees only host:port
                host, _, port = target.rpartition(":")
                r2, w2 = await asyncio.open_connection(host, int(port))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, w2), _pipe(r2, writer))
                return
            u = urlsplit(target)
            r2, w2 = await asyncio.open_connection(u.hostname, u.port or 80)
            path = (u.path or "/") + (f"?{u.query}" if u.query else "")
            out = [f"{method} {path} HTTP/1.1"]
            out += [f"{k}: {v}" for k, v in pairs if not k.lower().startswith("proxy-") and k.lower() != "connection"]
            out.append("Connection: close")
            w2.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            await w2.drain()
            answer = await r2.read()
            w2.close()
            rhead, _, rbody = answer.partition(b"\r\n\r\n")
            rlines = [x for x in rhead.split(b"\r\n") if not x.lower().startswith(b"connection:")]
            writer.write(b"\r\n".join([*rlines, b"Connection: close"]) + b"\r\n\r\n" + rbody)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass
