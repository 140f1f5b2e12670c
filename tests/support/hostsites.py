"""Small sites on several loopback addresses, served by a child process.

The child has its own event loop, so each request is stamped (CLOCK_MONOTONIC, the same
clock in every process) when it arrives, not when a crawler sharing the loop lets the
server run: gaps between a host's requests are measured as a server would see them.

    python tests/support/hostsites.py PAGES ADDR [ADDR ...]
prints one line of JSON {address: port} when listening; on SIGTERM writes the requests,
one `time address path` a line, to stdout and exits.
"""
from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

from aiohttp import web


async def main(pages: int, addresses: list[str]) -> None:
    log: list[str] = []
    links = "".join(f'<a href="/p{i}">p{i}</a>' for i in range(pages - 1))

    async def handle(request: web.Request) -> web.Response:
        log.append(f"{time.monotonic():.6f} {request.host.rsplit(':', 1)[0]} {request.path}")
        if request.path == "/":
            return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
        if request.path.startswith("/p"):
            return web.Response(text="<html><body>page</body></html>", content_type="text/html")
        raise web.HTTPNotFound()

    app = web.Application(handler_args={"access_log": None})
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    ports = {}
    for address in addresses:
        site = web.TCPSite(runner, address, 0)
        await site.start()
        ports[address] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(json.dumps(ports), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    sys.stdout.write("\n".join(log) + "\n")
    sys.stdout.flush()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2:]))
