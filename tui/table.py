"""A DataTable that is updated by diffing, never rebuilt per frame.

Panels hand `sync()` the rows they want, each as (key, cells). Rows are kept by key:
new keys are added, missing keys removed, and for existing rows only the cells whose
(text, style) changed go through `update_cell`. Cell values are (text, style) pairs so
that comparing them is cheap and no Rich object is built for an unchanged cell.

Columns have fixed widths except those with `width=None`, which share what is left
(by `flex` weight). A column with `min_table` is shown only when the table is at least
that wide; crossing such a width rebuilds the columns, on resize only.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tui.fmt import safe

Cell = tuple[str, str]  # (text, style); text is sanitised by safe() when rendered


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


class DiffTable(DataTable):
    """DataTable with keyed rows and per-cell diffing."""

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
        )
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._active: tuple[int, ...] = ()  # indices into COLUMNS currently shown
        self.cell_updates = 0  # counters for tests: proof that we diff, not rebuild
        self.rows_added = 0
        self.rows_removed = 0

    # -- columns -------------------------------------------------------------
    def on_mount(self) -> None:
        self._layout_columns()

    def on_resize(self) -> None:
        self._layout_columns()

    def _available_width(self) -> int:
        return self.scrollable_content_region.width or self.size.width

    def _layout_columns(self) -> None:
        width = self._available_width()
        active = tuple(i for i, c in enumerate(self.COLUMNS) if width >= c.min_table)
        if active != self._active:
            self._rebuild_columns(active)
        self._fit_flex(width)

    def _rebuild_columns(self, active: tuple[int, ...]) -> None:
        """Only when a resize crosses a column's min_table (or at mount)."""
        cursor = self.cursor_row
        self.clear(columns=True)
        self._active = active
        for i in active:
            c = self.COLUMNS[i]
            self.add_column(c.label, key=c.key, width=c.width or c.min_width)
        for key, cells in self._cells.items():
            self.add_row(*self._project(cells), key=key)
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)

    def _fit_flex(self, width: int) -> None:
        """Give the flexible columns whatever the fixed ones leave."""
        cols = [self.COLUMNS[i] for i in self._active]
        flex = [c for c in cols if c.width is None]
        if not flex:
            return
        pad = 2 * self.cell_padding
        fixed = sum(c.width + pad for c in cols if c.width)
        spare = width - fixed - pad * len(flex)
        weights = sum(c.flex for c in flex)
        changed = False
        for c in flex:
            each = max(c.min_width, spare * c.flex // weights)
            column = self.columns.get(c.key)  # type: ignore[call-overload]
            if column is not None and (column.width != each or column.auto_width):
                column.width = each
                column.auto_width = False
                changed = True
        if changed:
            self._require_update_dimensions = True
            self._clear_caches()
            self.refresh()

    # -- rows ----------------------------------------------------------------
    def _render(self, index: int, value: Cell) -> Text:
        text, style = value
        t = safe(text, style)
        if self.COLUMNS[index].justify == "right":
            t.justify = "right"
        return t

    def _project(self, cells: tuple[Cell, ...]) -> list[Text]:
        return [self._render(i, cells[i]) for i in self._active]

    def row_keys(self) -> list[str]:
        return list(self._cells)

    def cells_of(self, key: str) -> tuple[Cell, ...] | None:
        return self._cells.get(key)

    def sync(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Make the table show exactly these rows (new ones appended in order)."""
        wanted: dict[str, tuple[Cell, ...]] = {key: tuple(cells) for key, cells in rows}
        for key in [k for k in self._cells if k not in wanted]:
            self.remove(key)
        self.upsert(wanted.items())

    def upsert(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Add or update rows, leaving other rows alone."""
        keys = [c.key for c in self.COLUMNS]
        active = set(self._active)
        for key, cells in rows:
            cells = tuple(cells)
            old = self._cells.get(key)
            if old is None:
                self._cells[key] = cells
                if self._active:
                    self.add_row(*self._project(cells), key=key)
                self.rows_added += 1
            elif old != cells:
                self._cells[key] = cells
                for i, (before, after) in enumerate(zip(old, cells)):
                    if before != after and i in active:
                        self.update_cell(key, keys[i], self._render(i, after))
                        self.cell_updates += 1

    def remove(self, key: str) -> None:
        if self._cells.pop(key, None) is not None:
            if self._active:
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
