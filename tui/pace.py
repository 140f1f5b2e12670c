"""How often the screen refreshes: the configured rate, slowed to 2 Hz while the crawl
needs the whole core.

A same-loop TUI shares one core with the crawl; every frame it paints is CPU the crawl
does not get. When this process used (nearly) all of a core since the last frame, the
crawl is CPU-bound and the next frame waits longer, down to 2 Hz; when there is CPU to
spare, the rate climbs back. A frame that comes late (the loop was too busy to run
the timer on time: other work, or a core shared with other processes) counts as busy too.
The numbers stay readable at 2 Hz; the crawl gets the rest.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable

SLOWEST = 0.5  # seconds between frames: the display never drops below 2 Hz
BUSY = 0.85  # share of one core used since the last frame that counts as busy
SPARE = 0.5  # a monitor in its own process: less than half a core idle machine-wide is busy


def machine_idle() -> Callable[[], float]:
    """For a monitor in its own process (attach): a function returning the cores left idle
    on this machine since its last call (from /proc/stat; None-safe: 'plenty' elsewhere).
    Its own frames are cheap for the crawl only while a core is spare; when the machine
    is saturated (a CPU-bound crawl, its site, other work), every frame is CPU the crawl
    loses, so the monitor slows to 2 Hz as a same-loop TUI does."""
    last = [0.0, 0.0]  # idle ticks, wall seconds
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def idle() -> float:
        try:
            with open("/proc/stat", "rb") as f:
                fields = f.readline().split()
            ticks = float(fields[4]) + float(fields[5])  # idle + iowait, all cores
        except (OSError, IndexError, ValueError):
            return float("inf")
        now = time.monotonic()
        d_ticks, d_wall = ticks - last[0], now - last[1]
        first = last[1] == 0.0
        last[0], last[1] = ticks, now
        return float("inf") if first or d_wall <= 0 else d_ticks / tick / d_wall

    return idle


class Pace:
    def __init__(self, interval: float, *, clock: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.process_time,
                 idle: Callable[[], float] | None = None) -> None:
        self.fastest = min(interval, SLOWEST)
        self.interval = self.fastest
        self._clock, self._cpu, self._idle = clock, cpu, idle
        self._wall0, self._cpu0 = clock(), cpu()

    def next(self) -> float:
        """Called after each frame: the wait before the next one."""
        wall, cpu = self._clock(), self._cpu()
        spent, elapsed = cpu - self._cpu0, wall - self._wall0
        self._wall0, self._cpu0 = wall, cpu
        late = elapsed > 1.5 * self.interval  # the loop could not keep the beat
        saturated = self._idle is not None and self._idle() < SPARE
        if elapsed > 0 and (spent / elapsed >= BUSY or late or saturated):
            self.interval = min(SLOWEST, self.interval * 1.5)
        else:
            self.interval = max(self.fastest, self.interval / 1.5)
        return self.interval

    @property
    def hz(self) -> float:
        return 1.0 / self.interval
