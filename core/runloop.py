"""The engine's event loop: uvloop where it is installed, the standard loop elsewhere.

One crawltop process is bound by one core, and the loop's own work (selectors, callbacks,
transports) is a fifth of it: uvloop does that work in C (BENCHMARKS.md, "Speed on one
core"). It is optional so that crawltop installs and runs wherever Python does;
CRAWLTOP_LOOP=asyncio picks the standard loop (to compare the two, or to rule uvloop out).
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop, unless it is missing or CRAWLTOP_LOOP=asyncio; None: the standard one."""
    if os.environ.get("CRAWLTOP_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    """What `run` would use: 'uvloop' or 'asyncio' (for benches and debug lines)."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the engine's loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
