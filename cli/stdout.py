"""Standard output (and error) whose reader may leave (`crawltop crawl URL 2>&1 | head -1`).

Why: a write to a pipe nobody reads raises BrokenPipeError (Python ignores SIGPIPE). Raised
from a `print`, it unwound the command from wherever it stood: a crawl's state was never
marked finished, its WACZ never packed, a `--processes` output never gathered, and what
reached the user was "error: Broken pipe" and exit 2. Here stdout and stderr (the progress
lines), when not a terminal, are wrapped: once their reader has left, what is written goes
to /dev/null and the command carries on to its end; then it exits 141 (128 + SIGPIPE, what
`yes | head` gives under `set -o pipefail`) unless it had a code of its own to give.
"""
from __future__ import annotations

import os
import select
import sys
from collections.abc import Iterable
from typing import Any, TextIO


class _Guarded:
    """sys.stdout or sys.stderr, with writes and flushes that survive the reader's leaving.
    Everything else is the stream's own (`__getattr__`); nothing in crawltop uses the
    stream as a context manager or tests its class, which a proxy would not pass."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.left = False

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError as exc:
            self._reader_left(exc)
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError as exc:
            self._reader_left(exc)
            self._stream.flush()  # what was buffered goes to /dev/null now

    def _reader_left(self, exc: BrokenPipeError) -> None:
        if not gone(self._stream):
            raise exc  # a broken pipe that is not the reader's leaving: the caller's to handle
        self.left = True
        silence(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard() -> None:
    """Wrap sys.stdout and sys.stderr (not a terminal: the TUI writes there, and a terminal
    has no reader to lose)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, _Guarded):
            continue
        try:
            if stream.isatty():
                continue
        except (AttributeError, ValueError, OSError):
            continue
        setattr(sys, name, _Guarded(stream))


def reader_left() -> bool:
    """The reader of stdout or stderr left during the command."""
    return any(isinstance(s, _Guarded) and s.left for s in (sys.stdout, sys.stderr))


def gone(stream: Any = None) -> bool:
    """The stream (stdout by default) is a pipe whose reader closed it: poll says POLLERR for such a
    pipe's write end (POLLHUP for a socket whose peer did), nothing for a live one."""
    try:
        fd = (stream or sys.stdout).fileno()
        events = select.poll()
        events.register(fd, 0)  # POLLERR and POLLHUP are reported whatever was asked
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in events.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def silence(stream: Any = None) -> None:
    """From now on the stream's fd (stdout's by default) is /dev/null: later writes and the
    last flush can't fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, (stream or sys.stdout).fileno())
    except (AttributeError, OSError, ValueError):
        pass
    finally:
        os.close(devnull)
