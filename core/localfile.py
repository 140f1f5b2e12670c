"""Local files a user names (headers, cookies, records, indexes), read with bounds.

Why: a path on the command line may be anything: `/dev/zero`, a 3 GB single-line file, a
binary. Read whole or line by line without a bound, it holds the command forever or takes
the machine's memory; decoded strictly, a stray byte became a traceback. Here a file
read whole is refused past its limit, and a line past its limit ends the reading.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import TextIO

from .errors import UsageError

MB = 1 << 20
# What a pipe or FIFO held (`--cookies <(cmd)`, `--header @<(cmd)`), by its identity (the
# path is spelt relative once, absolute later): the options are read once to check them and
# again to use them, and a pipe's second read is empty (the cookies and headers were silently
# not sent) or, for a FIFO with no writer left, never returns.
_PIPES: dict[tuple[int, int], bytes] = {}


def read_text(path: str, what: str, limit: int, errors: str = "strict") -> str:
    """The whole of a small text file; a one-line UsageError (exit 2) if it can't be read,
    holds more than `limit` bytes, or is not UTF-8 (with errors="strict"). A pipe is read
    once: a second call is given what the first read."""
    try:
        st = os.stat(path)  # (a stat does not wait for a FIFO's writer)
        key = None if stat.S_ISREG(st.st_mode) else (st.st_dev, st.st_ino)
        data = _PIPES.get(key) if key is not None else None
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
            if key is not None:
                _PIPES[key] = data
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UsageError(f"{what} {path}: more than {limit // MB} MB: not what this option reads")
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None


def lines(fh: TextIO, limit: int) -> Iterator[str | None]:
    """Each line of fh (newline kept), then None and no more if a line is longer than
    `limit` characters: a file with such a line is not one of ours, and the line may never
    end (`/dev/zero`), so nothing after it is read."""
    while True:
        line = fh.readline(limit)
        if not line:
            return
        if len(line) >= limit and not line.endswith("\n"):
            yield None
            return
        yield line
