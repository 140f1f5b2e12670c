"""The parent of `crawl --processes`: one read of the crawl's records, while its engines
fetch, for `-o FILE` and the whole crawl's report.

Both used to read every record from Redis after the last engine left, one after the
other: a tenth of a two-process crawl's wall time (BENCHMARKS.md, issue 29). The parent
idles while the engines fetch, so it reads the record stream then (core/cluster/records.py
Tail), writing FILE's lines to FILE.tmp and adding each record to the report's Analysis;
at the end only the last records are left. Whatever goes wrong on the way (Redis, the
disk, a record the report can't read) leaves the end to do it the old way, which says why.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO

import redis

from ..core.cluster.records import Tail
from ..core.errors import ReportError
from ..core.reporting.formats import FORMATS
from ..core.reporting.linkcheck import Analysis
from .engine import final_report

OneOutput = Callable[[str, str, str, Sequence[str]], None]  # url, name, FILE, the per-process files
STEP_PAGES = 2  # at most 2,000 records a step, so Ctrl-C and the progress line wait for none


class Gather:
    def __init__(self, url: str, name: str, output: str | None) -> None:
        self.url, self.name, self.output = url, name, output
        self._r = redis.Redis.from_url(url, socket_timeout=5)  # as watch()'s: Ctrl-C waits on it
        self._file: IO[str] | None = None
        if output:
            try:
                self._file = open(f"{output}.tmp", "w", encoding="utf-8")
            except OSError:
                self._file = None  # the end writes FILE the old way, or says why it can't
        self._file_ok = self._file is not None
        self._analysis: Analysis | None = Analysis(source=f"crawl {name} on Redis")
        self._tail = Tail(self._r, name, self._write, self._add)
        self._complete = False

    def _write(self, line: str) -> None:
        if self._file_ok:
            try:
                self._file.write(line)  # type: ignore[union-attr]  # (_file_ok: it is open)
            except OSError:
                self._file_ok = False

    def _add(self, rec: dict) -> None:
        if self._analysis is not None:
            try:
                self._analysis.add(rec)
            except ReportError:
                self._analysis = None  # final_report says what is wrong with it

    def step(self) -> None:
        """While the engines fetch: what is new, a few pages of it."""
        with contextlib.suppress(redis.RedisError):
            self._tail.read(STEP_PAGES)

    def finish(self) -> None:
        """Every engine has left: read what is left."""
        try:
            self._tail.drain()
            self._complete = True
        except redis.RedisError:
            self._complete = False
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                self._file_ok = False

    def report(self) -> None:
        """The whole crawl's report, as final_report writes it."""
        if self._complete and self._analysis is not None:
            sys.stdout.write(FORMATS["text"](self._analysis.report()))
        else:
            final_report(self.url, self.name)

    def write_output(self, parts: Sequence[str], fallback: OneOutput) -> None:
        """-o FILE from what was read; else the old way (`fallback`: cli/processes.py one_output)."""
        assert self.output is not None
        tmp = f"{self.output}.tmp"
        if self._complete and self._file_ok:
            try:
                os.replace(tmp, self.output)
            except OSError:
                pass
            else:
                for part in parts:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(part)
                print(f"crawltop: {self._tail.records.count} records in {self.output}", file=sys.stderr)
                return
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        fallback(self.url, self.name, self.output, parts)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._r.close()

