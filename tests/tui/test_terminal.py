"""tui/terminal.py's writer on a real pty: frames the terminal can't take are dropped, never
queued; control sequences are kept; a dead terminal is reported, not raised or spun on."""
from __future__ import annotations

import os
import pty
import select
import time

from support.wait import wait_for

from crawltop.tui.terminal import Writer


def drain(fd: int, seconds: float = 0.3) -> int:
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.05)[0]:
            n += len(os.read(fd, 1 << 16))
    return n


def test_frames_are_dropped_while_the_terminal_is_not_reading() -> None:
    master, slave = pty.openpty()
    errors: list[str] = []
    writer = Writer(slave, errors.append)
    writer.start()
    try:
        assert writer.send(b"x" * (1 << 20), frame=True)  # idle: taken; far more than a pty holds
        wait_for(lambda: writer.stalled() > 0.2)  # nobody reads: the write blocks
        assert not writer.send(b"frame 2", frame=True)
        assert not writer.send(b"frame 3", frame=True)
        assert writer.dropped == 2
        assert writer.send(b"\x1b[?25h", frame=False)  # control: kept for when it reads again
        got = 0
        while not writer.idle() or got < (1 << 20):
            got += drain(master, 0.1)
        got += drain(master)
        assert got == (1 << 20) + len(b"\x1b[?25h")  # the first frame and the control, nothing else
        assert writer.send(b"frame 4", frame=True)  # caught up: frames go again
        wait_for(writer.idle)
        assert errors == []
    finally:
        writer.stop()
        os.close(master)
        os.close(slave)


def test_a_terminal_that_went_away_is_reported_once() -> None:
    master, slave = pty.openpty()
    errors: list[str] = []
    writer = Writer(slave, errors.append)
    writer.start()
    os.close(master)  # the terminal goes (tmux killed, ssh dropped): writes now fail with EIO
    writer.send(b"x" * 100, frame=True)
    wait_for(lambda: bool(errors))
    writer.join(timeout=10)
    assert not writer.is_alive()
    assert errors == ["terminal write failed (EIO)"]
    assert not writer.send(b"more", frame=False)  # nothing more is taken
    os.close(slave)
