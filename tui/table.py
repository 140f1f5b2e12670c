"""A DataTable that is updated by diffing, never rebuilt per frame.

Panels hand `sync()` the rows they want, each as (key, cells). Rows are kept by key:
new keys are added, missing keys removed, and a row whose cells changed gets one
`update_cell`. Cell values are (text, style) pairs, so comparing them is cheap and no
Rich object is built for an unchanged row.

Each row is laid out by us into *one* DataTable cell (the columns are fixed-width
fields of that line, and the header is the column's label). Measured on the demo
crawl, Textual renders each DataTable cell through Rich's Padding/Styled/render_lines
and re-renders every visible cell after any `update_cell`; with six real columns the
workers table alone cost ~20 ms per frame and the TUI ran at 0.83x headless. One cell
per row keeps DataTable's keys, cursor, scrolling and keys, and costs a sixth.

Columns have fixed widths except those with `width=None`, which share what is left
(by `flex` weight). A column with `min_table` is shown only when the table is at least
that wide. A width change re-lays every row: on resize only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from core.sanitize import clean

Cell = tuple[str, str]  # (text, style); text is sanitised (core.sanitize.clean) when laid out
ROW = "row"  # the one DataTable column
GAP = 2  # spaces between fields


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    width: int | None = None  # None: this column takes the width left over
    min_width: int = 6
    justify: str = "left"
    min_table: int = 0  # hide this column when the table is narrower than this
    flex: int = 1  # share of the left-over width, for width=None columns


def cell(text: object, style: str = "") -> Cell:
    return (str(text), style)


def _field(line: Text, text: str, style: str, width: int, justify: str) -> None:
    """Append `text` to `line` as a field exactly `width` cells wide (ellipsis if cut)."""
    if width <= 0:
        return
    text = clean(text, 2000)
    length = cell_len(text)
    if length > width:
        t = Text(text, style=style, end="")
        t.truncate(width, overflow="ellipsis")
        line.append_text(t)
        length = cell_len(t.plain)
        if length < width:
            line.append(" " * (width - length))
        return
    pad = " " * (width - length)
    if justify == "right":
        line.append(pad)
        line.append(text, style or None)
    else:
        line.append(text, style or None)
        line.append(pad)


class DiffTable(DataTable):
    """DataTable with keyed rows, diffed per row, each row laid out as one line."""

    COLUMNS: Sequence[Col] = ()
    # Row tables: home/end go to the first/last row (DataTable uses them for columns).
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None, show_header: bool = True) -> None:
        super().__init__(
            id=id,
            classes=classes,
            cursor_type="row",
            zebra_stripes=False,
            show_header=show_header,
            cell_padding=0,
        )
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._layout: tuple[tuple[int, int], ...] = ()  # (index into COLUMNS, width) shown
        self._line_width = 0
        self.cell_updates = 0  # counters for tests: proof that we diff, not rebuild
        self.rows_added = 0
        self.rows_removed = 0

    # -- layout ----------------------------------------------------------------
    def on_mount(self) -> None:
        self.add_column(Text(""), key=ROW, width=1)
        self._relayout()
        for key, cells in self._cells.items():  # rows given before we were mounted
            self.add_row(self._line(cells), key=key)

    def on_resize(self) -> None:
        self._relayout()

    def _available_width(self) -> int:
        return self.scrollable_content_region.width or self.size.width

    def _widths(self, width: int) -> tuple[tuple[int, int], ...]:
        shown = [(i, c) for i, c in enumerate(self.COLUMNS) if width >= c.min_table]
        fixed = sum(c.width for _, c in shown if c.width)
        flex = [c for _, c in shown if c.width is None]
        spare = width - 1 - fixed - GAP * max(0, len(shown) - 1)
        weights = sum(c.flex for c in flex) or 1
        out = []
        for i, c in shown:
            w = c.width if c.width else max(c.min_width, spare * c.flex // weights)
            out.append((i, w))
        return tuple(out)

    def _relayout(self) -> None:
        """Only when the width changed (or at mount): re-lay every row."""
        width = max(1, self._available_width())
        layout = self._widths(width)
        if layout == self._layout and width == self._line_width:
            return
        self._layout = layout
        self._line_width = width
        column = self.columns.get(ROW)  # type: ignore[call-overload]
        if column is None:
            return
        column.width = width
        column.auto_width = False
        column.label = self._header()
        for key, cells in self._cells.items():
            self.update_cell(key, ROW, self._line(cells))
        self._require_update_dimensions = True
        self._clear_caches()
        self.refresh()

    def _header(self) -> Text:
        line = Text(" ", no_wrap=True, end="")
        for n, (i, w) in enumerate(self._layout):
            if n:
                line.append(" " * GAP)
            c = self.COLUMNS[i]
            _field(line, c.label, "", w, c.justify)
        return line

    def _line(self, cells: tuple[Cell, ...]) -> Text:
        line = Text(" ", no_wrap=True, overflow="crop", end="")
        for n, (i, w) in enumerate(self._layout):
            if n:
                line.append(" " * GAP)
            text, style = cells[i]
            _field(line, text, style, w, self.COLUMNS[i].justify)
        return line

    # -- rows ----------------------------------------------------------------
    def row_keys(self) -> list[str]:
        return list(self._cells)

    def cells_of(self, key: str) -> tuple[Cell, ...] | None:
        return self._cells.get(key)

    def line_of(self, key: str) -> str:
        """The row as shown (plain text), for tests."""
        return str(self.get_cell(key, ROW))

    def sync(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Make the table show exactly these rows (new ones appended in order)."""
        wanted: dict[str, tuple[Cell, ...]] = {key: tuple(cells) for key, cells in rows}
        for key in [k for k in self._cells if k not in wanted]:
            self.remove(key)
        self.upsert(wanted.items())

    def upsert(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Add or update rows, leaving other rows alone."""
        for key, cells in rows:
            cells = tuple(cells)
            old = self._cells.get(key)
            if old == cells:
                continue
            self._cells[key] = cells
            if ROW not in self.columns:
                continue  # not mounted yet: on_mount adds it
            if old is None:
                self.add_row(self._line(cells), key=key)
                self.rows_added += 1
            else:
                self.update_cell(key, ROW, self._line(cells))
                self.cell_updates += 1

    def remove(self, key: str) -> None:
        if self._cells.pop(key, None) is not None and ROW in self.columns:
            self.remove_row(key)
            self.rows_removed += 1

    def clear_rows(self) -> None:
        self._cells.clear()
        self.clear()

    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:
            return None
        return row_key.value

    def at_end(self) -> bool:
        """Is the cursor on the last row (or the table empty)?"""
        return self.row_count == 0 or self.cursor_row >= self.row_count - 1
