"""The engine's event loop: the standard one, or uvloop when CRAWLTOP_LOOP=uvloop asks.

uvloop was measured as the engine's default loop and did not pay: the same CPU
per page on bench/compare.py (0.46 ms both, 4 interleaved rounds) and 0.4% fewer
instructions (BENCHMARKS.md, "Speed on one core"). The engine's time is in its own Python
and in lexbor, not in the loop. The switch stays, for measuring it again on another load.
"""
from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop if CRAWLTOP_LOOP=uvloop and it is installed; None: the standard one."""
    if os.environ.get("CRAWLTOP_LOOP", "").lower() != "uvloop":
        return None
    try:
        uvloop = importlib.import_module("uvloop")  # not a dependency: typed as Any
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """What `run` would use: 'uvloop' or 'asyncio' (for benches and debug lines)."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the engine's loop."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
