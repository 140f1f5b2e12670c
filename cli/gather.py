"""The parent of `crawl --processes`: one read of the crawl's records, while its engines
fetch, for `-o FILE` and the whole crawl's end report (cli/endreport.py).

Both used to read every record from Redis after the last engine left, one after the
other: a tenth of a two-process crawl's wall time (docs/benchmarks/redis.md, "`--processes 2`:
the parent reads the records while the engines fetch"). The parent idles while the engines
fetch, so it reads the record stream then (core/cluster/records.py Tail), writing FILE's lines
to FILE.tmp and counting each record into the report's Totals;
at the end only the last records are left. If the stream can't be read to its end (Redis
gone, a record that is not one), FILE and the report are made the old way at the end, which
says why; if FILE.tmp can't be written, FILE is. FILE.tmp never outlives the parent's
clean exit.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO

import redis

from ..core.cluster.connect import sync_client
from ..core.cluster.records import Tail
from .endreport import Totals

OneOutput = Callable[[str, str, str, Sequence[str]], None]  # url, name, FILE, the per-process files
STEP_PAGES = 2  # at most 2,000 records a step, so Ctrl-C and the progress line wait for none


class Gather:
    def __init__(self, url: str, name: str, output: str | None) -> None:
        self.url, self.name, self.output = url, name, output
        # no retries of its own: a step that finds Redis away is simply tried again 0.1 s later
        self._r = sync_client(url, socket_timeout=5, retry=None)
        self._tmp = f"{output}.tmp" if output else None
        self._file: IO[str] | None = None
        if self._tmp is not None:
            try:
                self._file = open(self._tmp, "w", encoding="utf-8")
            except OSError:
                self._file = None  # the end writes FILE the old way, or says why it can't
        self._totals: Totals | None = Totals()
        self._tail = Tail(self._r, name, self._write if self._file is not None else None, self._add)
        self._failed = False  # the stream could not be read: the end does it the old way
        self._complete = False
        self._renamed = False

    def _write(self, line: str) -> None:
        try:
            self._file.write(line)  # type: ignore[union-attr]  # (_write is given to the Tail only with a file)
        except (OSError, ValueError):  # a full disk; a str the codec refuses
            self._tail.out = None
            self._drop_file()

    def _add(self, rec: dict) -> None:
        if self._totals is not None:
            try:
                self._totals.add(rec)
            except (LookupError, TypeError, ValueError):
                self._totals = None  # not a record: the end counts the stream again, and says why

    def step(self) -> None:
        """While the engines fetch: what is new, a few pages of it."""
        if self._failed:
            return
        try:
            self._tail.read(STEP_PAGES)
        except redis.RedisError:
            pass  # away for now: the next step reads it
        except Exception:  # noqa: BLE001 - a record that is not one: the end reads the stream the old way
            self._failed = True

    def finish(self) -> None:
        """Every engine has left: read what is left."""
        if not self._failed:
            try:
                self._tail.drain()
                self._complete = True
            except Exception:  # noqa: BLE001 - Redis gone, or a record that is not one: the old way
                self._complete = False
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                self._drop_file()

    def totals(self) -> Totals | None:
        """The counts of every record of the crawl, once each; None if the stream could not
        be read to its end (the report reads it again: cli/engine.py whole_report)."""
        return self._totals if self._complete else None

    def write_output(self, parts: Sequence[str], fallback: OneOutput) -> None:
        """-o FILE from what was read; else the old way (`fallback`: cli/processes.py one_output)."""
        assert self.output is not None and self._tmp is not None
        if self._complete and self._file is not None:
            try:
                os.replace(self._tmp, self.output)
            except OSError:
                pass
            else:
                self._renamed = True
                for part in parts:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(part)
                print(f"crawltop: {self._tail.records.count:,} records in {self.output}", file=sys.stderr)
                return
        self._drop_file()
        fallback(self.url, self.name, self.output, parts)

    def _drop_file(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)

    def close(self) -> None:
        """FILE.tmp goes unless it became FILE (Ctrl-C at the end, an error on the way)."""
        if not self._renamed:
            self._drop_file()
        self._r.close()
