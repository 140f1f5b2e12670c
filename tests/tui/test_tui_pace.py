"""The refresh pace: the configured rate when there is CPU to spare, never below 2 Hz."""
from __future__ import annotations

from crawltop.tui.pace import SLOWEST, Pace


class Clocks:
    """Wall and CPU clocks the test moves by hand."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def run(self, wall: float, cpu_share: float) -> None:
        self.wall += wall
        self.cpu += wall * cpu_share


def test_busy_core_slows_to_2hz_and_spare_cpu_brings_4hz_back() -> None:
    c = Clocks()
    pace = Pace(0.25, clock=lambda: c.wall, cpu=lambda: c.cpu)
    for _ in range(10):
        c.run(pace.interval, 0.99)  # a CPU-bound crawl
        pace.next()
    assert pace.interval == SLOWEST and pace.hz == 2.0
    for _ in range(10):
        c.run(pace.interval, 0.3)  # the crawl waits on the network
        pace.next()
    assert pace.interval == 0.25


def test_a_late_frame_counts_as_busy_even_with_little_cpu() -> None:
    c = Clocks()
    pace = Pace(0.25, clock=lambda: c.wall, cpu=lambda: c.cpu)
    c.run(0.6, 0.2)  # the timer fired 0.35 s late: the loop (or the machine) is busy
    assert pace.next() > 0.25


def test_a_configured_rate_below_2hz_is_raised_to_2hz() -> None:
    c = Clocks()
    pace = Pace(2.0, clock=lambda: c.wall, cpu=lambda: c.cpu)
    c.run(2.0, 1.0)
    assert pace.next() == SLOWEST


def test_a_monitor_in_its_own_process_slows_while_the_machine_has_no_spare_core() -> None:
    """attach: its own CPU is small, but when no core is idle its frames come out of the crawl's."""
    c = Clocks()
    idle = [0.1]
    pace = Pace(0.25, clock=lambda: c.wall, cpu=lambda: c.cpu, idle=lambda: idle[0])
    for _ in range(10):
        c.run(pace.interval, 0.05)
        pace.next()
    assert pace.interval == SLOWEST
    idle[0] = 1.2  # a core is free again
    for _ in range(10):
        c.run(pace.interval, 0.05)
        pace.next()
    assert pace.interval == 0.25


def test_machine_idle_reads_real_cores() -> None:
    import os
    import time

    from crawltop.tui.pace import machine_idle

    idle = machine_idle()
    assert idle() == float("inf")  # the first call has nothing to compare with
    time.sleep(0.3)  # /proc/stat's counters advance in 10 ms ticks: time must pass to read any
    assert 0.0 <= idle() <= (os.cpu_count() or 1) + 0.5
