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
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import counting_site


@contextlib.contextmanager
def serve_site(pages: int, delay: float) -> Iterator[str]:
    """conftest's counting site: `pages` pages (the root and /p/1 ...), `delay` s each."""
    with counting_site(pages, delay) as counted:
        yield counted.url


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
