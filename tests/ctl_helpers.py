"""Helpers for the control-socket tests: a slow site in its own process, the CLI run as
real child processes, a private run directory per test."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

SITE = r"""
import asyncio, sys
from aiohttp import web
pages, delay = int(sys.argv[1]), float(sys.argv[2])
async def handle(request):
    if request.path == "/robots.txt":
        raise web.HTTPNotFound()
    i = int(request.match_info.get("n") or 0)
    await asyncio.sleep(delay)
    links = "".join(f'<a href="/p/{j}">{j}</a>' for j in range(i * 3 + 1, min(pages, i * 3 + 4)))
    return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
async def main():
    app = web.Application(handler_args={"access_log": None})
    app.router.add_get("/", handle)
    app.router.add_get("/p/{n}", handle)
    app.router.add_get("/robots.txt", handle)
    runner = web.AppRunner(app, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


@contextlib.contextmanager
def serve_site(pages: int, delay: float) -> Iterator[str]:
    """SITE in its own process: `pages` pages (the root and /p/1 ...), `delay` s each."""
    proc = subprocess.Popen([sys.executable, "-c", SITE, str(pages), str(delay)], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("http://"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """100,000 pages, 50 ms each: a crawl at -c 4 runs for minutes, steerable."""
    with serve_site(100_000, 0.05) as url:
        yield url


@pytest.fixture
def rundir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private run directory (short path: sun_path is 107 bytes) and state directory."""
    base = Path(tempfile.mkdtemp(prefix="ct"))
    run = base / "run"
    monkeypatch.setenv("CRAWLTOP_RUN_DIR", str(run))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    yield run
    for sock in run.glob("*") if run.exists() else ():  # never leave a crawl behind
        pid = _pid_of(sock)
        if pid:
            with __import__("contextlib").suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(base, ignore_errors=True)


def _pid_of(sock: Path) -> int | None:
    try:
        out = subprocess.run([sys.executable, "-m", "crawltop.cli", "ctl", sock.name, "status"],
                             capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout)["pid"] if out.returncode == 0 else None
    except Exception:
        return None


async def cli(*args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    """`crawltop ARGS...` as a real child process, without blocking the test's loop."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "crawltop.cli", *args,
                                                stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


async def status(name: str) -> dict:
    rc, out, err = await cli("ctl", name, "status")
    assert rc == 0, err
    return json.loads(out)


async def wait_status(name: str, cond, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = await status(name)
        if cond(s):
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"status never matched: {s}")
        await asyncio.sleep(0.2)


async def wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX":
                return  # exited; a zombie until whoever inherited it reaps it
        except (FileNotFoundError, IndexError):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"process {pid} still running")
