"""An append-only table of events that never scrolls away what the person is reading.

Rows arrive oldest first. While the table is not focused, or its cursor sits on the
newest row, it follows: new rows are appended, the cursor moves to the newest, and the
oldest rows beyond `limit` are dropped. Once the person moves the cursor up, the table
stops following: new rows are still appended below, nothing above them moves, and old
rows are not trimmed until a hard cap (and then the cursor is shifted with them).

A table that grows changes its scrollable height, which costs Textual a layout pass of
the whole screen; so new rows are let in at most every `interval` seconds (the counts
in the panel headings still move every frame).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical

from ...core.monitor.stats import Snapshot
from .line import Line
from .table import Cell, DiffTable


class LogTable(DiffTable):
    limit = 200
    hard_limit = 2000
    interval = 1.0

    def __init__(self, *, id: str | None = None, classes: str | None = None, show_header: bool = False) -> None:
        super().__init__(id=id, classes=classes, show_header=show_header)
        self.last_seq = 0
        self._pending: list[tuple[str, Sequence[Cell]]] = []
        self._flushed = float("-inf")

    @property
    def following(self) -> bool:
        return not self.has_focus or self.at_end()

    def append(self, rows: Sequence[tuple[str, Sequence[Cell]]], *, now: bool = False) -> None:
        """Queue rows; let them in if `interval` has passed (or `now`)."""
        self._pending.extend(rows)
        t = time.monotonic()
        if not self._pending or (not now and t - self._flushed < self.interval):
            return
        self._flushed = t
        rows, self._pending = self._pending, []
        follow = self.following
        self.upsert(rows)
        keys = self.row_keys()
        if follow:
            excess = len(keys) - self.limit
            if excess > 0:
                self.remove_many(keys[:excess])
            if self.row_count:
                self.move_cursor(row=self.row_count - 1)
        else:
            excess = len(keys) - self.hard_limit
            if excess > 0:
                self.remove_many(keys[:excess])  # the cursor keeps its row
                self.scroll_to(y=max(0, self.scroll_offset.y - excess), animate=False)


class LogPanel(Vertical):
    """A heading plus a LogTable fed with the snapshot's newest events (by seq).

    Subclasses say which table, which events, how a row looks and what the heading says.
    """

    TABLE: type[LogTable] = LogTable
    TABLE_ID = ""
    home: frozenset[str] = frozenset()  # the roots' hosts: their URLs show by path

    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = self.TABLE(id=self.TABLE_ID)
        yield self.heading
        yield self.table

    def events(self, snap: Snapshot) -> Sequence[Any]:
        raise NotImplementedError

    def cells(self, event: Any) -> tuple[Cell, ...]:
        raise NotImplementedError

    def heading_parts(self, snap: Snapshot) -> list:
        raise NotImplementedError

    def show(self, snap: Snapshot) -> None:
        self.heading.show(*self.heading_parts(snap))
        table = self.table
        events = self.events(snap)
        new = [(str(e.seq), self.cells(e)) for e in events if e.seq > table.last_seq]
        if new:
            table.last_seq = events[-1].seq
        # every frame, so rows held back by the table's interval get in; at once when the
        # crawl is not running at speed
        table.append(new, now=snap.state != "RUNNING")
