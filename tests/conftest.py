"""Fixtures every folder of tests uses: real aiohttp servers on 127.0.0.1 (`serve`), a real
redis-server (`redis_server`, `redis_url`), and for the tests of real crawltop processes a
slow counting site in its own process (`site`) and a private run directory (`rundir`).
Helpers that tests call are in tests/support/."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from support.ctl import serve_site
from support.sites import Handler, Site


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[dict[str, Handler]], Awaitable[Site]]]:
    sites: list[Site] = []

    async def start(routes: dict[str, Handler], address: str = "127.0.0.1") -> Site:
        site = Site(routes)
        await site.start(address)
        sites.append(site)
        return site

    yield start
    for site in sites:
        await site.stop()


# -- a real redis-server (issue 10): Debian's, on a free loopback port, persistence off --

@pytest.fixture
def redis_server(tmp_path):
    """One private redis-server per test. Without one on PATH: skipped with the reason, but
    in CI (CI=true) a failure, so the cluster tests can never silently not run."""
    import os
    import shutil

    from crawltop.core.cluster.server import RedisServer, free_port

    if shutil.which("redis-server") is None:
        message = "redis-server is not installed (apt-get install redis-server; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = RedisServer.start(tmp_path / "redis", port=free_port())
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    return redis_server.url


# -- for the tests of real crawltop processes: a slow site, a private run directory ------

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
