"""A keyed, diffed row table on Textual's Line API: the panels' tables.

It replaces Textual's DataTable, which dominated the frame (measured: DiffTable's docstring).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from ...core.monitor.sanitize import clean

Cell = tuple[str, str]  # (text, Rich style); text is sanitised (core/monitor/sanitize.py clean) when laid out
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
    cut: str = "end"  # where text too long for the column is cut: "end", or "middle" (URLs: both ends say the most)


def cell(text: object, style: str = "") -> Cell:
    return (str(text), style)


def middle(text: str, width: int) -> str:
    """`text` cut to `width` cells with the ellipsis in the middle, the end kept longer: rows of
    URLs that share a prefix (`/private/report…`) stay told apart by where they differ."""
    if cell_len(text) <= width or width < 5:
        return text
    keep = width - 1
    head = keep // 3
    tail = keep - head
    out = text[:head] + "…" + text[len(text) - tail:]
    return out if cell_len(out) <= width else text  # wide characters: the end cut below


def _field(line: Text, text: str, style: str, width: int, justify: str, cut: str = "end") -> None:
    """Append `text` to `line` as a field exactly `width` cells wide (ellipsis if cut)."""
    if width <= 0:
        return
    text = clean(text, 2000)  # never markup: Text.append takes it literally
    if cut == "middle":
        text = middle(text, width)
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


class DiffTable(ScrollView, can_focus=True):
    """Keyed rows, diffed per row, one cached Strip per row, with a row cursor.

    Panels hand `sync()` the rows they want, each as (key, cells). Rows are kept by key: new
    keys are appended, missing keys removed, and only a row whose cells changed is laid out
    again. Cell values are (text, style) pairs, so comparing them is cheap and no Rich object
    is built for an unchanged row.

    Why not `textual.widgets.DataTable`: measured on the demo crawl, it renders every cell
    through Rich's Padding/Styled/render_lines and drops its whole render cache on any
    `update_cell`, so the workers table (every row changes every frame) cost ~7.5 ms per
    frame for 10 rows, against 0.4 ms for one Text per row and one cached Strip per row; the
    TUI ran at 0.83x headless, the target is 0.9x. Kept from DataTable: a header, a row cursor
    (up/down/pgup/pgdn/home/end or a click), scrolling that keeps it in view, focus styling.

    Columns have fixed widths except those with `width=None`, which share what is left (by
    `flex` weight). A column with `min_table` is shown only when the table is at least that
    wide. A width change re-lays every row: on resize only.
    """

    COLUMNS: Sequence[Col] = ()
    COMPONENT_CLASSES = {"difftable--header", "difftable--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First row", show=False),
        Binding("end", "last", "Last row", show=False),
    ]
    DEFAULT_CSS = """
    DiffTable {
        background: $surface;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        & > .difftable--header {
            background: $panel;
            color: $foreground;
            text-style: bold;
        }
        /* the cursor is drawn only in the panel that has the keyboard */
        &:focus > .difftable--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None, show_header: bool = True) -> None:
        super().__init__(id=id, classes=classes)
        self.show_header = show_header
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._keys: list[str] = []  # display order
        self._index: dict[str, int] | None = {}  # key -> row; None: rebuild lazily
        self._strips: dict[str, Strip] = {}  # laid-out rows (without cursor), by key
        self._layout: tuple[tuple[int, int], ...] = ()  # (index into COLUMNS, width) shown
        self._width = 0
        self._header_strip: Strip | None = None
        self._base: Style | None = None
        self.cursor_row = 0
        self.cell_updates = 0  # counters for tests: proof that we diff, not rebuild
        self.rows_added = 0
        self.rows_removed = 0

    # -- geometry ------------------------------------------------------------
    @property
    def header_height(self) -> int:
        return 1 if self.show_header else 0

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - self.header_height)

    def _update_virtual_size(self) -> None:
        """A row more or less needs no screen layout (12-25 ms a time at 120x40) unless the
        vertical scrollbar comes or goes: otherwise set the size quietly and repaint."""
        new = Size(self._width, len(self._keys) + self.header_height)
        old = self.virtual_size
        if new == old:
            return
        height = self.container_size.height
        if (self.is_mounted and old.width == new.width and height
                and (old.height > height) == (new.height > height)):
            self.set_reactive(Widget.virtual_size, new)
            if self.show_vertical_scrollbar:
                self.vertical_scrollbar.window_virtual_size = new.height
            if self.scroll_y > self.max_scroll_y:
                self.scroll_y = self.max_scroll_y
            self.refresh()
            return
        self.virtual_size = new

    def on_mount(self) -> None:
        self._relayout()

    def on_resize(self) -> None:
        self._relayout()

    def _widths(self, width: int) -> tuple[tuple[int, int], ...]:
        shown = [(i, c) for i, c in enumerate(self.COLUMNS) if width >= c.min_table]
        fixed = sum(c.width for _, c in shown if c.width)
        flex = [c for _, c in shown if c.width is None]
        spare = width - 1 - fixed - GAP * max(0, len(shown) - 1)
        weights = sum(c.flex for c in flex) or 1
        return tuple((i, c.width if c.width else max(c.min_width, spare * c.flex // weights)) for i, c in shown)

    def _relayout(self) -> None:
        """When the width changed (or at mount): lay every row out again."""
        width = max(1, self.scrollable_content_region.width or self.size.width)
        if width == self._width and self._layout:
            return
        self._width = width
        self._layout = self._widths(width)
        self._strips.clear()
        self._header_strip = None
        self._update_virtual_size()
        self.refresh()

    def set_columns(self, columns: Sequence[Col]) -> None:
        """Another set of columns (rare: a panel that learns what its rows carry)."""
        if tuple(columns) == tuple(self.COLUMNS):
            return
        self.COLUMNS = tuple(columns)
        self._width = 0
        self._strips.clear()
        if self.is_mounted:
            self._relayout()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._header_strip = None

    # -- laying out ------------------------------------------------------------
    def _line(self, cells: Sequence[Cell] | None, labels: bool = False) -> Text:
        line = Text(" ", no_wrap=True, overflow="crop", end="")
        for n, (i, w) in enumerate(self._layout):
            if n:
                line.append(" " * GAP)
            col = self.COLUMNS[i]
            if labels:
                _field(line, col.label, "", w, col.justify)
            else:
                text, style = cells[i]  # type: ignore[index]
                _field(line, text, style, w, col.justify, col.cut)
        return line

    def _strip(self, text: Text, base: Style) -> Strip:
        text.stylize_before(base)
        segments = list(text.render(self.app.console))
        return Strip(segments).adjust_cell_length(self._width, base)

    def _row_strip(self, key: str, base: Style) -> Strip:
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._strip(self._line(self._cells[key]), base)
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        # rich_style walks the ancestors' backgrounds: work it out once per paint
        self._base = self.rich_style
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        base = self._base if self._base is not None else self.rich_style
        width = self._width or self.size.width
        if self.show_header and y == 0:
            if self._header_strip is None:
                style = base + self.get_component_rich_style("difftable--header")
                self._header_strip = self._strip(self._line(None, labels=True), style)
            return self._header_strip
        row = int(self.scroll_offset.y) + y - self.header_height
        if not 0 <= row < len(self._keys):
            return Strip.blank(width, base)
        key = self._keys[row]
        if row == self.cursor_row and self.has_focus:
            style = base + self.get_component_rich_style("difftable--cursor")
            return self._strip(self._line(self._cells[key]), style)
        return self._row_strip(key, base)

    # -- rows ----------------------------------------------------------------
    def row_keys(self) -> list[str]:
        return list(self._keys)

    def cells_of(self, key: str) -> tuple[Cell, ...] | None:
        return self._cells.get(key)

    def line_of(self, key: str) -> str:
        """The row as shown (plain text), for tests."""
        return self._line(self._cells[key]).plain

    def get_row_index(self, key: str) -> int:
        if self._index is None:
            self._index = {k: i for i, k in enumerate(self._keys)}
        return self._index[key]

    def sync(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Make the table show exactly these rows (new ones appended in order)."""
        wanted: dict[str, tuple[Cell, ...]] = {key: tuple(cells) for key, cells in rows}
        gone = [k for k in self._cells if k not in wanted]
        if gone:
            self.remove_many(gone)
        self.upsert(wanted.items())

    def upsert(self, rows: Iterable[tuple[str, Sequence[Cell]]]) -> None:
        """Add or update rows, leaving other rows alone."""
        added = changed = False
        for key, cells in rows:
            cells = tuple(cells)
            old = self._cells.get(key)
            if old == cells:
                continue
            self._cells[key] = cells
            self._strips.pop(key, None)
            if old is None:
                if self._index is not None:
                    self._index[key] = len(self._keys)
                self._keys.append(key)
                self.rows_added += 1
                added = True
            else:
                self.cell_updates += 1
                changed = True
        if added:
            self._update_virtual_size()
        if added or changed:
            self.refresh()

    def remove_many(self, keys: Iterable[str]) -> None:
        gone = {k for k in keys if k in self._cells}
        if not gone:
            return
        cursor_key = self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None
        before = sum(1 for k in self._keys[: self.cursor_row] if k in gone)
        for k in gone:
            del self._cells[k]
            self._strips.pop(k, None)
        self._keys = [k for k in self._keys if k not in gone]
        self._index = None
        self.rows_removed += len(gone)
        # The cursor stays on its row if that row is still here; otherwise on the row
        # that took its place.
        if cursor_key is not None and cursor_key not in gone:
            self.cursor_row -= before
        self.cursor_row = max(0, min(self.cursor_row, len(self._keys) - 1))
        self._update_virtual_size()
        self.refresh()

    def clear_rows(self) -> None:
        self._cells.clear()
        self._keys.clear()
        self._strips.clear()
        self._index = {}
        self.cursor_row = 0
        self._update_virtual_size()
        self.scroll_to(y=0, animate=False)
        self.refresh()

    # -- cursor ----------------------------------------------------------------
    def selected_key(self) -> str | None:
        if not self._keys:
            return None
        return self._keys[max(0, min(self.cursor_row, len(self._keys) - 1))]

    def at_end(self) -> bool:
        """Is the cursor on the last row (or the table empty)?"""
        return not self._keys or self.cursor_row >= len(self._keys) - 1

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        row = max(0, min(row, len(self._keys) - 1))
        if row != self.cursor_row:
            self.cursor_row = row
            self.refresh()
        if scroll:
            # after the next refresh: rows just added count in the scrollable height then
            self.call_after_refresh(self.scroll_cursor_visible, animate)

    def scroll_cursor_visible(self, animate: bool = False) -> None:
        top = int(self.scroll_offset.y)
        body = self.body_height
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=animate)
        elif self.cursor_row >= top + body:
            self.scroll_to(y=self.cursor_row - body + 1, animate=animate)

    def action_cursor(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step * self.body_height)

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=len(self._keys) - 1)

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y) + event.y - self.header_height
        if 0 <= row < len(self._keys):
            self.move_cursor(row=row)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
