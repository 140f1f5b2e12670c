"""Terminal drivers that never let the terminal cost the crawl its loop, and that notice
when the terminal has gone (a hang-up).

What goes wrong with Textual's own driver and what ours does instead: TtyDriver's docstring.
"""
from __future__ import annotations

import asyncio
import errno
import os
import selectors
import signal
import termios
import threading
import time
from codecs import getincrementaldecoder
from functools import partial
from typing import Any

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

STALL = float(os.environ.get("CRAWLTOP_TTY_STALL", "30"))  # seconds one write may block
MAX_CONTROL = 64 * 1024  # control bytes kept while the terminal is not reading
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
# What LinuxDriver.stop_application_mode writes: bracketed paste and mouse off, line wrap on,
# kitty keys off, leave the alt screen, show the cursor, focus events off.
RESTORE = (b"\x1b[?2004l\x1b[?7h\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l"
           b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l")


def driver_class() -> type[Driver] | None:
    """The driver for CrawlApp: ours for a tty and for textual-serve; None (Textual's choice)
    for any other TEXTUAL_DRIVER a user set."""
    wanted = os.environ.get("TEXTUAL_DRIVER")
    if wanted == WEB_DRIVER:
        return PipeWebDriver
    if wanted or os.name != "posix":
        return None
    return TtyDriver


def _report(app: Any, reason: str) -> None:
    """Tell the app (on its loop) that its terminal is gone: CrawlApp.hang_up, else exit."""
    handler = getattr(app, "hang_up", None)
    if handler is not None:
        handler(reason)
    else:
        app.exit()


class Writer(threading.Thread):
    """Writes to its own duplicate of the terminal's fd, so moving the process's stdio away
    (cli/hangup.py) never waits on a write in progress here."""

    def __init__(self, fd: int, on_error: Any) -> None:
        super().__init__(daemon=True, name="crawltop-tty-writer")
        self.fd = os.dup(fd)
        self.on_error = on_error
        self.cond = threading.Condition()
        self.chunks: list[bytes] = []
        self.size = 0
        self.busy_since: float | None = None
        self.dead = False
        self.dropped = 0  # frames dropped (tests and the benchmark read it)

    def send(self, data: bytes, *, frame: bool) -> bool:
        """Queue bytes; a frame only if the terminal took everything before. False: dropped."""
        with self.cond:
            if self.dead or (frame and (self.busy_since is not None or self.chunks)) or \
                    (not frame and self.size > MAX_CONTROL):
                self.dropped += frame
                return False
            self.chunks.append(data)
            self.size += len(data)
            self.cond.notify()
            return True

    def stalled(self) -> float:
        """Seconds the current write has been blocked (0 when idle)."""
        since = self.busy_since
        return 0.0 if since is None else time.monotonic() - since

    def idle(self) -> bool:
        with self.cond:
            return self.busy_since is None and not self.chunks

    def stop(self, last: bytes = b"") -> None:
        """Take nothing more; what is queued (and `last`) is still written, if it can be."""
        with self.cond:
            if last and not self.dead:
                self.chunks.append(last)
            self.dead = True
            self.cond.notify()

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.chunks and not self.dead:
                        self.cond.wait()
                    if not self.chunks:
                        return
                    data = b"".join(self.chunks)
                    self.chunks.clear()
                    self.size = 0
                    self.busy_since = time.monotonic()
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
                with self.cond:
                    self.busy_since = None
        except OSError as exc:
            with self.cond:
                self.dead = True
            self.on_error(f"terminal write failed ({errno.errorcode.get(exc.errno or 0, exc)})")
        finally:
            os.close(self.fd)


class TtyDriver(LinuxDriver):
    """LinuxDriver whose writes never block the loop and which reports a hang-up.

    Textual's LinuxDriver hands every write to a thread through a queue of 30; when the
    terminal stops reading (a dropped SSH link, a killed tmux server) that thread blocks or
    dies, the queue fills, and the event loop blocks in `Queue.put` with the crawl and its
    control socket behind it. Its input thread then spins on the hung-up tty's EOF. Here:
    - a frame is handed to the writer thread only when that thread is idle; a frame the
      terminal cannot take yet is dropped, and the whole screen is repainted once the
      terminal catches up (a dropped delta would otherwise leave stale cells);
    - control sequences (alt screen, mouse modes) are never dropped; they are tiny;
    - a hang-up is reported to the app (`app.hang_up(reason)`) when: SIGHUP arrives, the tty
      reads EOF or fails (EIO), a write fails (EIO, EPIPE), or one write has been blocked for
      STALL seconds. The writer then takes nothing more, and the app's shutdown writes
      nothing and waits for no thread.
    """

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.gone = False
        self._frame: list[str] = []
        self._in_frame = False
        self._repaint = False
        # None until start_application_mode: hang_up and stop read it to know whether we started
        self._loop: asyncio.AbstractEventLoop | None = None  # type: ignore[assignment]
        self._watch: asyncio.Task[None] | None = None
        self._writer: Writer | None = None

    # -- output -------------------------------------------------------------------------
    def frame(self, on: bool) -> None:
        """CrawlApp brackets each display with this: only frames may be dropped."""
        self._in_frame = on

    def write(self, data: str) -> None:
        self._frame.append(data)

    def flush(self) -> None:
        if not self._frame:
            return
        data, self._frame = "".join(self._frame).encode("utf-8", "replace"), []
        writer = self._writer
        if writer is None or self.gone:
            return
        if not writer.send(data, frame=self._in_frame) and self._in_frame:
            self._repaint = True  # the next frame the terminal takes shows everything

    async def _watch_terminal(self) -> None:
        """Once a second: a write blocked past STALL is a hang-up; after dropped frames, a full
        repaint as soon as the writer is idle."""
        while not self.gone and self._writer is not None:
            await asyncio.sleep(1.0 if not self._repaint else 0.1)
            if self._writer.stalled() > STALL:
                self.hang_up(f"the terminal stopped reading for {STALL:g} s")
            elif self._repaint and self._writer.idle():
                self._repaint = False
                self._app.screen.refresh()

    def hang_up(self, reason: str) -> None:
        """Called on the loop or from a thread: stop all output, tell the app once."""
        if self.gone:
            return
        self.gone = True
        self.exit_event.set()
        if self._writer is not None:  # a terminal that is still there (a SIGHUP sent by hand) gets its screen back
            self._writer.stop(last=RESTORE)
        if threading.current_thread() is threading.main_thread() and self.attrs_before is not None:
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            try:
                termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)
            except termios.error:
                pass
            finally:
                signal.signal(signal.SIGTTOU, old)
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        try:
            if running is loop:
                loop.call_soon(_report, self._app, reason)
            else:
                loop.call_soon_threadsafe(_report, self._app, reason)
        except RuntimeError:  # the loop has closed: the app is gone already, nothing to tell
            pass

    # -- application mode ---------------------------------------------------------------
    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()
        assert self._file is not None  # LinuxDriver's stderr: there is one, or no TUI
        self._writer = Writer(self._file.fileno(), self.hang_up)
        self._writer.start()
        super().start_application_mode()
        if self._writer_thread is not None:  # Textual's own writer: never used for output here
            self._writer_thread.stop()
        self._loop.add_signal_handler(signal.SIGHUP, self.hang_up, "SIGHUP")
        self._watch = self._loop.create_task(self._watch_terminal(), name="crawltop-tty-watch")

    def _sigcont_application(self, *_: Any) -> None:
        # Only a ctrl+z of ours is undone here. A hang-up comes with a SIGCONT too, and it
        # may run before the SIGHUP is handled: the dead tty must not be taken back.
        if not self.gone and self._must_signal_resume:
            super()._sigcont_application()

    def stop_application_mode(self) -> None:
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGHUP)  # (that sets SIG_DFL)
            if self.gone:  # more SIGHUPs come when a session leader exits: they must not kill us now
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
        if self._watch is not None:
            self._watch.cancel()
        if self.gone:  # nothing to restore on a terminal that is gone; write and wait for nothing
            self.disable_input()
            return
        super().stop_application_mode()

    def close(self) -> None:
        writer = self._writer
        if writer is None:
            return
        writer.stop()
        if not self.gone:
            writer.join(timeout=STALL)  # the last bytes (leave the alt screen) should reach it

    def run_input_thread(self) -> None:
        """Textual's input loop, but EOF or an error on a tty is a hang-up, not a spin."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        from textual._xterm_parser import XTermParser

        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        try:
            while not self.exit_event.is_set():
                for _key, mask in selector.select(0.1):
                    if not mask & selectors.EVENT_READ:
                        continue
                    try:
                        data = os.read(self.fileno, 4096)
                    except OSError as exc:
                        data, err = b"", errno.errorcode.get(exc.errno or 0, str(exc))
                    else:
                        err = "EOF"
                    if not data:
                        if self.input_tty:
                            self.hang_up(f"the terminal went away ({err} on input)")
                        return  # a pipe or /dev/null on stdin: no keys, and no spinning
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()


class PipeWebDriver(WebDriver):
    """textual-serve's driver, but a closed pipe (the server is gone) ends the monitor."""

    gone = False
    _loop: asyncio.AbstractEventLoop | None = None  # type: ignore[assignment]  # None: not started yet

    def start_application_mode(self) -> None:
        self._loop = asyncio.get_running_loop()
        super().start_application_mode()

    def write(self, data: str) -> None:
        try:
            super().write(data)
        except OSError:
            self._gone("stdout closed")

    def write_meta(self, data: dict[str, object]) -> None:
        try:
            super().write_meta(data)
        except OSError:
            self._gone("stdout closed")

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():  # the input ended without the app asking: EOF
            self._gone("stdin closed")

    def _gone(self, reason: str) -> None:
        if self.gone:
            return
        self.gone = True
        self.exit_event.set()
        self._write = partial(len)  # nothing more goes to a pipe nobody reads
        try:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(_report, self._app, f"crawltop web went away ({reason})")
        except (AssertionError, RuntimeError):  # no loop to tell: nothing left to watch
            os._exit(0)


def move_stdio(log: str | os.PathLike[str] | None) -> None:
    """Point fds 0, 1 and 2 away from a terminal that is gone: stdin to /dev/null, stdout
    and stderr to `log` (appended) or /dev/null. A print after a hang-up must neither fail
    with EIO nor block on a terminal nobody reads; Python's buffers flush to the new place."""
    null = os.open(os.devnull, os.O_RDWR)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600) if log is not None else null
    for fd, target in ((0, null), (1, out), (2, out)):
        os.dup2(target, fd)
    for fd in {null, out}:
        os.close(fd)


def to_devnull() -> None:
    move_stdio(None)
