"""The blocking control-socket client of `ctl`, `ls` and scripts: a socket and the JSON
framing, without asyncio or the engine, so those commands start at once."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from ... import __version__
from ..errors import RemoteError
from ..jsonfast import DecodeError, dumps, loads

# The protocol's version and the longest reply line (core/sockets/protocol.py takes them from here).
PROTOCOL = 1
MAX_REPLY = 16 * 1024 * 1024


def encode(message: dict[str, Any]) -> bytes:
    """One JSON line (core/sockets/protocol.py's framing)."""
    return dumps(message) + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """A reply line -> its object; RemoteError for anything else (the server's own decode
    raises ProtocolError instead)."""
    try:
        message = loads(line)
    except (UnicodeDecodeError, DecodeError) as exc:
        raise RemoteError(f"not a JSON line from the crawl: {exc}") from None
    if not isinstance(message, dict):
        raise RemoteError("not a JSON object from the crawl")
    return message


class Client:
    """A blocking one-request-at-a-time client, for `ctl`, `ls` and scripts."""

    def __init__(self, path: Path | str, *, timeout: float = 5.0, client: str = "crawltop ctl") -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(self.path)
        except OSError as exc:
            self.sock.close()
            raise RemoteError(f"cannot connect to {path}: {exc.strerror or exc}") from None
        self.file = self.sock.makefile("rb")
        self._id = 0
        self.hello = self.call("hello", protocol=PROTOCOL, version=__version__, client=client)

    def call(self, op: str, **args: Any) -> Any:
        self._id += 1
        message: dict[str, Any] = {"op": op, "id": self._id}
        if op in ("hello", "snapshot"):
            message.update(args)
        elif args:
            message["args"] = args
        try:
            self.sock.sendall(encode(message))
            line = self.file.readline(MAX_REPLY)
        except OSError as exc:
            raise RemoteError(f"no answer from the crawl: {exc.strerror or exc or 'timed out'}") from None
        if not line.endswith(b"\n"):
            raise RemoteError("the crawl closed the connection")
        reply = decode(line)
        if reply.get("event") == "bye":
            raise RemoteError("the crawl has just ended")
        if not reply.get("ok"):
            raise RemoteError(str(reply.get("error")))
        return reply.get("result")

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
