"""`--on-hangup detach|stop`: what a crawl in the same-loop TUI does when its terminal goes.

A hang-up (SIGHUP, EOF/EIO on the tty, a failed or long-blocked write: tui/terminal.py)
closes the screen. With `detach` (the default) the crawl then goes on exactly as if it had
been started with `--detach`: stdin on /dev/null, stdout and stderr appended to
`<state dir>/log/NAME.log` (progress lines every 2 s, the final report at the end),
SIGHUP ignored, SIGINT/SIGTERM a clean stop, `ls` showing it detached, `attach` bringing
the screen back. With `stop` it stops as `q` would: in-flight URLs go back, every record
is flushed, a `--state` crawl can be resumed; the report goes to the same log.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

from ..core.sockets.rundir import state_dir

CHOICES = ("detach", "stop")


def add_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--on-hangup", choices=CHOICES, default="detach",
                   help="TUI: when the terminal goes away (SIGHUP, a dead tty, a terminal that stops "
                        "reading), go on detached with the log in the state dir, or stop cleanly (default detach)")


def log_path(name: str) -> str:
    logs = state_dir() / "log"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(logs / f"{name}.log")


class Hangup:
    """The HangupPolicy of tui/app.py for a crawl listening on `control` (core/sockets/server.py)."""

    def __init__(self, action: str, control: Any, *, name: str | None = None) -> None:
        self.stop = action == "stop"
        self.control = control  # None: the monitor of `--processes`, whose engines are children
        self.name: str = name or control.name
        self.log: str | None = None
        self.reason: str | None = None

    def moved(self, reason: str) -> None:
        """At the hang-up, on the loop: off the dead terminal before anything else is written."""
        from ..tui.terminal import move_stdio  # (only a TUI has a hang-up: Textual is loaded)

        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.reason = reason
        name = self.name
        try:
            self.log = log_path(name)
            move_stdio(self.log)
        except OSError:  # no writable state dir: the crawl still goes on, unlogged
            self.log = None
            move_stdio(None)
        if self.control is not None:
            self.control.mode = "stopping" if self.stop else "detached"
        then = ("stopping cleanly (--on-hangup stop)" if self.stop
                else f"the crawl goes on detached: crawltop attach {name}")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        os.write(2, f"crawltop: {stamp} {reason}; {then}\n".encode())

    async def carry_on(self, crawler: Any, task: asyncio.Task[Any]) -> None:
        """The rest of the crawl without a screen: what a --detach child does. The signals
        and the progress lines are about this process's own engine (the control server's),
        not a whole shared crawl the screen may have shown."""
        import asyncio

        from .headless import PROGRESS_EVERY, progress_line

        crawler = self.control.crawler
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, crawler.stop)

        async def progress() -> None:
            while True:
                await asyncio.sleep(PROGRESS_EVERY)
                sys.stderr.write(progress_line(crawler.stats.snapshot()) + "\n")
                sys.stderr.flush()

        ticker = asyncio.create_task(progress())
        try:
            with contextlib.suppress(BaseException):
                await task
        finally:
            ticker.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
