"""Helpers for the control-socket tests: a slow site in its own process, the CLI run as
real child processes (the fixtures `site` and `rundir` are in tests/conftest.py)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from support.sites import counting_site
from support.wait import wait_until, wait_value


@contextlib.contextmanager
def serve_site(pages: int, delay: float) -> Iterator[str]:
    """support.sites' counting site: `pages` pages (the root and /p/1 ...), `delay` s each."""
    with counting_site(pages, delay) as counted:
        yield counted.url


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


async def wait_status(name: str, cond, timeout: float = 30.0) -> dict:
    try:
        s = await wait_value(lambda: status(name), cond, timeout, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"status {exc}") from None
    assert isinstance(s, dict)
    return s


def ended(pid: int) -> bool:
    """Exited; a zombie until whoever inherited it reaps it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX"
    except (FileNotFoundError, IndexError):
        return True


async def wait_gone(pid: int, timeout: float = 30.0) -> None:
    await wait_until(lambda: ended(pid), timeout, interval=0.1, what=f"the end of process {pid}")
