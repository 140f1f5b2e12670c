"""What the tests of real crawltop processes on a shared crawl have in common: start and
run the CLI, wait for a condition, and read who recorded what from Redis."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import redis

from crawltop.core.cluster.keys import Keys

CLI = [sys.executable, "-m", "crawltop.cli"]


def start(*args: str, env: dict | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def wait_for(cond: Callable[[], object], timeout: float = 30.0,
             what: str | Callable[[], str] = "condition") -> None:
    """Poll; `what` (or what it returns, read at the timeout) names the condition."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not reached in {timeout:g} s")
        time.sleep(0.02)


def records_of(r: redis.Redis, name: str) -> int:
    return int(r.hget(Keys(name).count, "records") or 0)


def recorded_by(r: redis.Redis, name: str) -> dict[str, int]:
    """proc -> records it wrote, from the stream (each entry says who wrote it)."""
    out: dict[str, int] = {}
    for _id, fields in r.xrange(Keys(name).rec):
        proc = fields[b"proc"].decode()
        out[proc] = out.get(proc, 0) + 1
    return out
