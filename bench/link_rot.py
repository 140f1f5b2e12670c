"""Link rot against a crawl: a 200-page site whose every page links to 3 dead hosts.

    .venv/bin/python bench/link_rot.py                   # defaults vs --no-external, 3 rounds
    BENCH_CRAWLTOP_BEFORE="env PYTHONPATH=/tmp/old/build/pkgtree .venv/bin/python -m crawltop.cli" \\
        .venv/bin/python bench/link_rot.py               # adds an older build as "before"

The dead hosts, 60 of them on loopback addresses: 20 names that don't resolve (`*.invalid`
is refused without a query by any resolver, RFC 6761), 20 hosts that accept and never
answer, 20 that refuse (a closed port). Each page links to one of each kind, a path of its
own, so every dead host has 10 URLs. The crawl is the real command line (`crawltop crawl
--headless -q -o FILE`), --timeout 5 as in the report that asked for it.

Printed, medians over the rounds: the whole crawl's wall time; when the last of the site's
own 200 pages was fetched (from the records' `fetched_at`, relative to the first record);
and the connections each silent host was asked for (a refused connect reaches no server).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from aiohttp import web

PAGES = 200
DEAD = 20  # of each kind


class Silent:
    """Accepts, counts, never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self.held: list[asyncio.StreamWriter] = []

    async def start(self, address: str) -> str:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            self.held.append(writer)

        server = await asyncio.start_server(accept, address, 0)
        return f"http://{address}:{server.sockets[0].getsockname()[1]}"

    def reset(self) -> None:
        for w in self.held:
            w.transport.abort()
        self.held.clear()
        self.connections = 0


def closed_port(address: str) -> str:
    import socket

    with socket.socket() as s:
        s.bind((address, 0))
        return f"http://{address}:{s.getsockname()[1]}"


async def site(dead: list[str]) -> str:
    async def handle(request: web.Request) -> web.Response:
        name = request.path.strip("/") or "p0"
        if not name.startswith("p") or not name[1:].isdigit() or int(name[1:]) >= PAGES:
            raise web.HTTPNotFound()
        k = int(name[1:])
        kids = [f"/p{c}" for c in (2 * k + 1, 2 * k + 2) if c < PAGES]
        outs = [f"{dead[(k + j * DEAD) % len(dead)]}/from{k}" for j in range(3)]
        body = "".join(f'<a href="{h}">{h}</a>\n' for h in kids + outs)
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    app = web.Application(handler_args={"access_log": None})
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    return f"http://127.0.0.1:{port}"


async def crawl(command: list[str], root: str, extra: list[str]) -> tuple[float, float, int]:
    """(wall s, last site page fetched at s, records) of one crawl."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.jsonl"
        began = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *command, "crawl", root, "--headless", "-q", "--timeout", "5", "-o", str(out), *extra,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            cwd=tmp)  # not the repository: its crawltop/ folder would shadow an older build's
        await proc.wait()
        wall = time.monotonic() - began
        records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    times = [datetime.fromisoformat(r["fetched_at"]).timestamp() for r in records if r.get("fetched_at")]
    first = min(times)
    site_pages = [datetime.fromisoformat(r["fetched_at"]).timestamp() for r in records
                  if r["url"].startswith(root) and r.get("fetched_at")]
    return wall, max(site_pages) - first, len(records)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    here = Path(__file__).resolve().parents[1]
    tools = {"after": [str(here / ".venv/bin/python"), "-m", "crawltop.cli"]}
    before = os.environ.get("BENCH_CRAWLTOP_BEFORE")
    if before:
        tools = {"before": shlex.split(before), **tools}
    silent = [Silent() for _ in range(DEAD)]
    silent_urls = [await s.start(f"127.0.1.{i + 1}") for i, s in enumerate(silent)]
    refused = [closed_port(f"127.0.2.{i + 1}") for i in range(DEAD)]
    unresolved = [f"http://dead-{i}.invalid" for i in range(DEAD)]
    dead = [u for trio in zip(unresolved, silent_urls, refused, strict=True) for u in trio]
    root = await site(dead) + "/"
    modes = {"defaults": [], "--no-external": ["--no-external"]}
    rows: dict[tuple[str, str], list[tuple[float, float, int, float]]] = {}
    for _ in range(a.runs):
        for tool, command in tools.items():
            for mode, extra in modes.items():
                wall, last_page, n = await crawl(command, root, extra)
                conns = statistics.mean(s.connections for s in silent)
                for s in silent:
                    s.reset()
                rows.setdefault((tool, mode), []).append((wall, last_page, n, conns))
    print(f"{'build':8} {'mode':14} {'wall s':>8} {'last page s':>12} {'records':>8} {'conns/silent host':>18}")
    for (tool, mode), runs in rows.items():
        med = [statistics.median(col) for col in zip(*runs, strict=True)]
        print(f"{tool:8} {mode:14} {med[0]:8.2f} {med[1]:12.2f} {med[2]:8.0f} {med[3]:18.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
