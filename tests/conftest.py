"""Fixtures every folder of tests uses: real aiohttp servers on 127.0.0.1 (`serve`), a real
redis-server (`redis_server`, `redis_url`), and for the tests of real crawltop processes a
slow counting site in its own process (`site`) and a private run directory (`rundir`).
Helpers that tests call are in tests/support/.

What a test needs beyond Python is its marker (`redis`, `tmux`, `chromium`, `pywb`,
registered in pyproject.toml) and one rule for all four, here: without the tool the test
is skipped with the reason, but with CI set it fails, so CI can never silently not run it."""
from __future__ import annotations

import contextlib
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
from support.sites import Site, serving


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Site]]]:
    async with serving() as start:
        yield start


# -- a real redis-server (the shared crawl's store): Debian's, on a free loopback port, persistence off --

@pytest.fixture
def redis_server(tmp_path):
    """One private redis-server per test, on a free port (so xdist workers never share one).
    A test that uses it is marked `redis` (below): without redis-server, skipped or failed."""
    from crawltop.core.cluster.server import RedisServer, free_port

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


# -- each pytest process (each xdist worker) its own run and state directories ------------

def pytest_configure(config: pytest.Config) -> None:
    """Crawls a test starts list themselves in the run directory and log to the state
    directory: one private pair per process, so no test (a dashboard that lists every crawl,
    a crawl claiming a name) sees another worker's crawls, nor the user's own. The `rundir`
    fixture gives a test a pair of its own on top of this."""
    base = Path(tempfile.mkdtemp(prefix="ctw"))  # short: sun_path is 107 bytes
    config.stash[_BASE] = base
    os.environ["CRAWLTOP_RUN_DIR"] = str(base / "run")
    os.environ["XDG_STATE_HOME"] = str(base / "state")


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_BASE, None)
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


_BASE = pytest.StashKey[Path]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[pytest.TestReport]:
    """A failing test that ran crawls in a private run directory shows the tail of each
    engine's log (a `--processes` child writes only there): its cause, when a child exits 1."""
    report = yield
    rundir = getattr(item, "funcargs", {}).get("rundir")
    if report.when == "call" and report.failed and isinstance(rundir, Path):
        for log in sorted((rundir.parent / "state" / "crawltop" / "log").glob("*.log")):
            with contextlib.suppress(OSError):
                report.sections.append((f"engine log {log.name}", log.read_text(errors="replace")[-3000:]))
    return report


# -- what a test needs: one rule for the markers redis, tmux, chromium and pywb ----------

def _tool(*names: str, hint: str) -> Callable[[], str | None]:
    def missing() -> str | None:
        found = any(shutil.which(n) or os.path.exists(n) for n in names)
        return None if found else f"{names[0]} is not installed ({hint}; .ci/run installs it)"
    return missing


def _pywb() -> str | None:
    """webrecorder's tools, in their own virtualenv, built on first use (support/archive_tools.py)."""
    from support.archive_tools import tool

    try:
        tool("wayback")
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"pywb could not be installed into .venv-archive ({exc}; make test builds it)"
    return None


NEEDS: dict[str, Callable[[], str | None]] = {
    "redis": _tool("redis-server", hint="apt-get install redis-server"),
    "tmux": _tool("tmux", hint="apt-get install tmux"),
    "chromium": _tool("chromium", "chromium-browser", "/usr/lib/chromium/chromium", hint="apt-get install chromium"),
    "pywb": _pywb,
}
_missing: dict[str, str | None] = {}  # asked once per worker
REDIS_FIXTURES = {"redis_server", "redis_url", "redis_unix_server"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes a redis-server fixture needs redis-server: marked so, wherever it
    is. The tests that drive Chromium run on one xdist worker, one after another (`make test`
    uses --dist loadgroup): several Chromiums at once on a 2-core machine starve each other
    until their pages time out."""
    for item in items:
        if REDIS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.redis)
        if item.get_closest_marker("chromium") is not None:
            item.add_marker(pytest.mark.xdist_group("chromium"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, missing in NEEDS.items():
        if item.get_closest_marker(name) is None:
            continue
        if name not in _missing:
            _missing[name] = missing()
        why = _missing[name]
        if why is not None:
            if os.environ.get("CI"):
                pytest.fail(f"CI is set, so this test must run: {why}", pytrace=False)
            pytest.skip(why)
