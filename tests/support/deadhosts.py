"""Hosts that rot: a TCP server that accepts and never answers, and one that accepts and closes
at once (a FIN, no response). Each counts the connections it was asked for."""
from __future__ import annotations

import asyncio


class DeadHost:
    """`silent`: hold each connection open, answer nothing; else close it at once."""

    def __init__(self, silent: bool) -> None:
        self.silent = silent
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._held: list[asyncio.StreamWriter] = []

    async def start(self, address: str) -> str:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            if self.silent:
                self._held.append(writer)
            else:
                writer.close()

        self._server = await asyncio.start_server(accept, address, 0)
        self.url = f"http://{address}:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        for w in self._held:
            w.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
