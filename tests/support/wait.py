"""Waiting for a condition, the one place the tests poll: a test waits for the state it
needs (a count reached, a process gone, a line printed), never for a guessed time.

A wait's timeout guards against a hang; it is never a claim about speed (a test that claims
a time measures it and asserts it). So every wait here lasts at least FLOOR seconds before it
gives up: a wait ends as soon as its condition holds, only a failing test ever waits it out,
and a loaded 2-core machine (the suite's workers and whatever else runs) can take many times
the usual to get there."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

FLOOR = 30.0


async def until(pilot, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    """wait_until for Pilot tests: lets the app process its messages while waiting."""
    deadline = asyncio.get_running_loop().time() + max(timeout, FLOOR)
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


async def wait_until(cond: Callable[[], object], timeout: float = 30.0, interval: float = 0.01,
                     what: str = "condition") -> None:
    """Polls `cond` on the test's loop (which keeps running the servers and the crawl)."""
    deadline = asyncio.get_running_loop().time() + max(timeout, FLOOR)
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} not reached in time")
        await asyncio.sleep(interval)


async def wait_value(get: Callable[[], Awaitable[object]], cond: Callable[[object], object],
                     timeout: float = 20.0, interval: float = 0.1) -> object:
    """Polls an awaitable reading (a status over a socket, a Redis hash) until `cond` holds on it."""
    deadline = asyncio.get_running_loop().time() + max(timeout, FLOOR)
    while True:
        value = await get()
        if cond(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never matched: {value!r}")
        await asyncio.sleep(interval)


def wait_for(cond: Callable[[], object], timeout: float = 30.0,
             what: str | Callable[[], str] = "condition", interval: float = 0.02) -> None:
    """The blocking form, for tests of child processes; `what` (or what it returns, read at
    the timeout) names the condition."""
    timeout = max(timeout, FLOOR)
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what() if callable(what) else what}: not reached in {timeout:g} s")
        time.sleep(interval)

