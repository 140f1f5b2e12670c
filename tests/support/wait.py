"""Waiting for a condition without blocking the test's loop."""
from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(pilot, cond: Callable[[], bool], timeout: float = 10.0) -> None:
    """wait_until for Pilot tests: lets the app process its messages while waiting."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)


async def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)
