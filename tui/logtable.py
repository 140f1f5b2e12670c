"""An append-only table of events that never scrolls away what the person is reading.

Rows arrive oldest first. While the table is not focused, or its cursor sits on the
newest row, it follows: new rows are appended, the cursor moves to the newest, and the
oldest rows beyond `limit` are dropped. Once the person moves the cursor up, the table
stops following: new rows are still appended below, nothing above them moves, and old
rows are not trimmed until a hard cap (and then the cursor is shifted with them).
"""
from __future__ import annotations

from collections.abc import Sequence

from tui.table import Cell, DiffTable


class LogTable(DiffTable):
    limit = 200
    hard_limit = 2000

    def __init__(self, *, id: str | None = None, classes: str | None = None, show_header: bool = False) -> None:
        super().__init__(id=id, classes=classes, show_header=show_header)
        self.last_seq = 0

    @property
    def following(self) -> bool:
        return not self.has_focus or self.at_end()

    def append(self, rows: Sequence[tuple[str, Sequence[Cell]]]) -> None:
        if not rows:
            return
        follow = self.following
        self.upsert(rows)
        keys = self.row_keys()
        if follow:
            excess = len(keys) - self.limit
            for key in keys[: max(0, excess)]:
                self.remove(key)
            if self.row_count:
                self.move_cursor(row=self.row_count - 1, animate=False)
        else:
            excess = len(keys) - self.hard_limit
            if excess > 0:
                row = self.cursor_row
                for key in keys[:excess]:
                    self.remove(key)
                self.move_cursor(row=max(0, row - excess), animate=False, scroll=False)
