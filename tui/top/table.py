"""The dashboard's table: one row per crawl, its words and numbers, sorted and filtered.

Outcome words are core/outcomes.py's (failed = the URLs that could not be fetched); host
counts are the engine's host states (core/queueing/hosts.py STATES): ready (and fetching),
waiting, backoff.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ...core.dashboard.board import Row
from .. import fmt
from ..panels.sparks import bars, buckets
from ..widgets.table import Cell, Col, DiffTable, cell

SPARK_CELLS = 8
STATE_STYLE = {"RUNNING": "$success", "PAUSED": "$warning", "STOPPING": "$warning", "starting": "dim",
               "done": "", "crashed": "bold $error", "lost": "bold $error",
               "not answering": "bold $warning", "bad data": "bold $warning"}


class CrawlsTable(DiffTable):
    COLUMNS = (
        Col("name", "name", 12),
        Col("state", "state", 13),
        Col("mode", "mode", 8, min_table=140),
        Col("pages", "pages", 6, justify="right"),
        Col("spark", "pages/s", SPARK_CELLS),
        Col("rate", "", 5, justify="right"),
        Col("queued", "queued", 7, justify="right"),
        Col("failed", "failed", 6, justify="right"),
        Col("hosts", "rdy/wait/bo", 11, justify="right", min_table=110),
        Col("elapsed", "elapsed", 7, justify="right"),
        Col("root", "root", None, 8, min_table=96),
    )

    on_moved: Callable[[], None] | None = None  # the app: the detail line and the keys follow the cursor

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        before = self.cursor_row
        super().move_cursor(row=row, animate=animate, scroll=scroll)
        if self.cursor_row != before and self.on_moved is not None:
            self.on_moved()

    def order(self, keys: Sequence[str]) -> None:
        """Show the rows in this order (the sort), the cursor staying on its crawl."""
        keys = [k for k in keys if k in self._cells]
        if keys == self._keys:
            return
        selected = self.selected_key()
        self._keys = keys
        self._index = None
        if selected in keys:
            self.cursor_row = keys.index(selected)
        self._strips.clear()
        self.refresh()


def spark(row: Row) -> str:
    data = row.summary.spark if row.summary is not None else ()
    if not data:
        return ""
    return bars(buckets(data, SPARK_CELLS, "mean"), 1)[0].rjust(SPARK_CELLS)


def host_numbers(row: Row) -> tuple[int, int, int] | None:
    """Hosts ready (or fetching), waiting, backing off; None for a crawl that is not running."""
    if row.summary is None or not row.live:
        return None
    c = row.summary.host_counts
    return c.get("ready", 0) + c.get("fetching", 0), c.get("waiting", 0), c.get("backoff", 0)


def hosts(row: Row) -> str:
    n = host_numbers(row)
    return "" if n is None else "/".join(map(str, n))


def elapsed(row: Row, now: float | None = None) -> float:
    if row.summary is not None:
        return row.summary.elapsed
    if row.started:
        return max(0.0, (row.ended or (now or time.time())) - row.started)
    return 0.0


def cells(row: Row) -> tuple[Cell, ...]:
    s = row.summary
    state = row.state
    style = STATE_STYLE.get(row.how or state, "")
    if row.how == "stopped":
        style = "$text-muted"
    dim = "" if row.live else "dim"
    return (
        cell(row.name, "bold" if row.live else ""),
        cell(state, style),
        cell(row.mode if row.live else "", "dim"),
        cell(fmt.compact(s.pages) if s else "", dim),
        cell(spark(row), "$accent" if row.live else "dim"),
        cell(f"{s.rate_now:.0f}" if s is not None and row.live else "", dim),
        cell(fmt.compact(s.queued) if s else "", dim),
        cell(fmt.compact(s.failed) if s else "", "$error" if s is not None and s.failed and row.live else dim),
        cell(hosts(row), dim),
        cell(fmt.duration(elapsed(row)) if s is not None or row.started else "", dim),
        cell(row.root.split("://", 1)[-1], "dim"),  # the host first; the detail line has the whole URL
    )


def _num(get: Callable[[Any], float]) -> Callable[[Row], tuple[Any, ...]]:
    return lambda r: (r.live, get(r.summary) if r.summary is not None else -1.0, r.name)


# Each order puts live crawls first; numbers largest first.
SORTS: dict[str, tuple[Callable[[Row], Any], bool]] = {
    "name": (lambda r: (not r.live, r.name), False),
    "state": (lambda r: (not r.live, r.state, r.name), False),
    "pages": (_num(lambda s: s.pages), True),
    "rate": (_num(lambda s: s.rate_now), True),
    "queued": (_num(lambda s: s.queued), True),
    "failed": (_num(lambda s: s.failed), True),
    "elapsed": (_num(lambda s: s.elapsed), True),
}


def matches(row: Row, text: str) -> bool:
    """The `/` filter: a substring of the name, the state or the root, any case."""
    t = text.lower()
    return not t or t in row.name.lower() or t in row.state.lower() or t in row.root.lower()


def sorted_rows(rows: Sequence[Row], sort: str, text: str = "") -> list[Row]:
    """The rows the filter keeps, in the sort's order (live crawls first either way)."""
    key, reverse = SORTS[sort]
    return sorted((r for r in rows if matches(r, text)), key=key, reverse=reverse)
