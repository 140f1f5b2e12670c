"""How often the screen refreshes: the configured rate, slowed to 2 Hz while the crawl
needs the whole core.

A same-loop TUI shares one core with the crawl; every frame it paints is CPU the crawl
does not get. When this process used (nearly) all of a core since the last frame, the
crawl is CPU-bound and the next frame waits longer, down to 2 Hz; when there is CPU to
spare, the rate climbs back. A frame that comes late (the loop was too busy to run
the timer on time: other work, or a core shared with other processes) counts as busy too. The numbers stay readable at 2 Hz; the crawl gets the rest.
"""
from __future__ import annotations

import time
from typing import Callable

SLOWEST = 0.5  # seconds between frames: the display never drops below 2 Hz
BUSY = 0.85  # share of one core used since the last frame that counts as busy


class Pace:
    def __init__(self, interval: float, *, clock: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.process_time) -> None:
        self.fastest = min(interval, SLOWEST)
        self.interval = self.fastest
        self._clock, self._cpu = clock, cpu
        self._wall0, self._cpu0 = clock(), cpu()

    def next(self) -> float:
        """Called after each frame: the wait before the next one."""
        wall, cpu = self._clock(), self._cpu()
        spent, elapsed = cpu - self._cpu0, wall - self._wall0
        self._wall0, self._cpu0 = wall, cpu
        late = elapsed > 1.5 * self.interval  # the loop could not keep the beat
        if elapsed > 0 and (spent / elapsed >= BUSY or late):
            self.interval = min(SLOWEST, self.interval * 1.5)
        else:
            self.interval = max(self.fastest, self.interval / 1.5)
        return self.interval

    @property
    def hz(self) -> float:
        return 1.0 / self.interval
