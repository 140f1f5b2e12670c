"""The queues view (`H`): every host's queue, full screen, as Heritrix's queues report.

The side panel shows the top 20 hosts; this screen lists all of them, a few dozen rows at a
time, however many hosts there are (QueuesScreen).
"""
from __future__ import annotations

from typing import Any, Protocol, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen

from ...core.errors import RemoteError
from ...core.monitor.hosttext import delay_text, state_text
from ...core.monitor.stats import HostView, Snapshot
from ...core.queueing.hosts import STATES
from ...core.steering.steer import HOST_SORTS
from ...core.surface import Monitor
from .. import fmt
from ..panels.breakdown import host_cells
from ..panels.keybar import KeyBar
from ..panels.status import hosts_parts
from ..widgets.line import Line
from ..widgets.table import Col, DiffTable

SORTS = tuple(HOST_SORTS)  # queued, errors, latency, wake, done, host
FILTERS: tuple[str | None, ...] = (None, *STATES)
INTERVAL = 0.5  # seconds between reads of the table (2 Hz)


class QueuesTable(DiffTable):
    COLUMNS = (
        Col("host", "host", None, 12),
        Col("state", "state", 17),
        Col("queued", "queued", 6, justify="right"),
        Col("flight", "fl", 3, justify="right", min_table=100),  # at 80: "fetching ×2"
        Col("done", "done", 5, justify="right"),
        Col("errors", "err", 4, justify="right"),
        Col("delay", "delay", 6, justify="right"),
        Col("source", "source", 15, min_table=100),
        Col("avg", "avg", 6, justify="right"),
        Col("over", "over", 5, justify="right", min_table=112),
        Col("failures", "fails", 5, justify="right", min_table=112),
    )

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        super().move_cursor(row=row, animate=animate, scroll=scroll)
        screen = self.screen
        if isinstance(screen, QueuesScreen):
            screen.cursor_moved()


class HostsApp(Protocol):
    """What this screen needs of its app (tui/app.py CrawlApp, which imports this module)."""

    @property
    def crawler(self) -> Monitor: ...
    @property
    def last_snapshot(self) -> Snapshot | None: ...
    @property
    def live(self) -> bool: ...
    def toggle_host(self, host: str) -> None: ...
    def ask_host_delay(self, host: str, current: float) -> None: ...


class QueuesScreen(Screen[None]):
    """Every host's queue: state, queued, in flight, done, errors, delay and its source,
    latency; sorted, filtered by state, steered with h and t.

    Rows come from `parts.host_table.host_table(sort, state, limit)` (core/steering/steer.py), columns
    that matter first so 80 columns hold them. The table is O(hosts log hosts) in the engine,
    so it is read at 2 Hz, by a timer re-armed after each read (reads never overlap), and only
    as many rows as the cursor can reach soon are asked for. `o` / `O` change the order,
    `f` / `F` the state shown; `h` and `t` act on the selected host, as in the hosts panel.
    An attached monitor pulls the same rows over the socket (core/sockets/client.py); one
    without a host table (a crawl shared through Redis) shows the snapshot's top hosts.
    """

    BINDINGS = [
        Binding("escape", "close", "Back", id="queues-back"),
        Binding("o", "sort(1)", "Sort", id="queues-sort",
                tooltip="Next order: queued, errors, latency, wake, done, host (O: back)"),
        Binding("O", "sort(-1)", "Sort back", id="queues-sort-back", show=False, key_display="O",
                tooltip="Previous order"),
        Binding("f", "filter(1)", "State", id="queues-filter",
                tooltip="Show only hosts in the next state: all, ready, fetching, waiting, ... (F: back)"),
        Binding("F", "filter(-1)", "State back", id="queues-filter-back", show=False, key_display="F",
                tooltip="Previous state filter"),
        Binding("h", "toggle_host", "Pause host", id="queues-host-pause",
                tooltip="Pause / resume the selected host"),
        Binding("t", "host_delay", "Delay", id="queues-host-delay", tooltip="Set the selected host's delay"),
    ]

    def __init__(self, sort: str = "queued", state: str | None = None) -> None:
        super().__init__(id="queues-view")
        self.sort = sort
        self.state = state
        self.rows: list[HostView] = []
        self.note = ""  # why the rows are the snapshot's top hosts, if they are
        self.reads = 0  # tables read (tests)
        self._asked = 0  # the limit of the last read
        self._timer: Any = None

    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.counts = Line(id="queues-counts")
        self.table = QueuesTable(id="queues-table")
        self.detail = Line(id="queues-detail")
        yield self.heading
        yield self.counts
        yield self.table
        yield self.detail
        yield KeyBar()

    def on_mount(self) -> None:
        self.table.focus()
        self.call_after_refresh(self._tick)  # laid out first: the rows to ask for fit the table

    def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()

    # -- reading ----------------------------------------------------------------------
    def _tick(self) -> None:
        """One read, then re-arm: a slow read delays the next, reads never overlap."""
        try:
            if self.is_current:  # a prompt on top (t): keep its host where it is
                self.show()
        finally:
            if self.is_mounted and self.app.is_running:
                self._timer = self.set_timer(INTERVAL, self._tick, name="crawltop-queues")

    @property
    def crawl_app(self) -> HostsApp:
        return cast(HostsApp, self.app)  # Textual types a screen's app as App[Any]

    @property
    def limit(self) -> int:
        """Rows to ask for: down to two pages past the cursor (the rest cost nothing)."""
        table = self.table
        return max(table.cursor_row, int(table.scroll_offset.y)) + 2 * max(10, table.body_height) + 1

    def fetch(self) -> list[HostView]:
        table = self.crawl_app.crawler.parts.host_table
        self._asked = self.limit
        if table is not None:
            try:
                rows = list(table.host_table(self.sort, self.state, self._asked))
                self.note = ""
                return rows
            except RemoteError as exc:
                self.note = str(exc)
        else:
            self.note = "this monitor has no host table: the top hosts of the snapshot"
        snap = self.crawl_app.last_snapshot
        rows = [h for h in (snap.hosts if snap is not None else ()) if self.state is None or h.state == self.state]
        key, reverse = HOST_SORTS[self.sort]
        return sorted(rows, key=key, reverse=reverse)

    def show(self, snap: Any = None) -> None:
        self.rows = self.fetch()
        self.reads += 1
        # Keyed by rank: the order changes between reads, a rank's place does not.
        self.table.sync((str(i), host_cells(h, short=False)) for i, h in enumerate(self.rows))
        self._show_heading()
        self._show_detail()

    def _show_heading(self) -> None:
        snap = self.crawl_app.last_snapshot
        counts = snap.host_counts if snap is not None else {}
        total = counts.get(self.state, 0) if self.state else sum(counts.values())
        shown = len(self.rows)
        parts: list = [("Host queues ", "bold"), (fmt.count(max(total, shown)), "bold"),
                       ("  sort ", "dim"), (self.sort, "bold $accent"), (" o", "dim"),
                       ("  state ", "dim"), (self.state or "all", "bold $accent"), (" f", "dim")]
        if total > shown:
            parts += [("  first ", "dim"), fmt.count(shown), ("  (move down for more)", "dim")]
        self.heading.show(*parts)
        if self.note:
            self.counts.show((self.note, "$warning"))
        else:
            line = hosts_parts(snap, self.size.width or 80, always=True) if snap is not None else []
            self.counts.show(*(line or [(" no host states from this store", "dim")]))

    def selected(self) -> HostView | None:
        key = self.table.selected_key()
        if key is None or int(key) >= len(self.rows):
            return None
        return self.rows[int(key)]

    def _show_detail(self) -> None:
        """The selected host in words: what the cut columns hold at 80 columns."""
        h = self.selected()
        if h is None:
            self.detail.show(("no host" + (f" in state {self.state}" if self.state else ""), "dim"))
            return
        parts: list = [(h.host, "bold"), "  ", state_text(h) or "no state"]
        if h.delay:
            parts += [("  delay ", "dim"), delay_text(h), *([(" from ", "dim"), h.source] if h.source else [])]
        if h.failures:
            parts += [("  failures in a row ", "dim"), (str(h.failures), "$error")]
        if h.over:
            parts += [("  over budget ", "dim"), (fmt.count(h.over), "$warning")]
        if h.paused:
            parts += [("  paused: h resumes", "$warning")]
        self.detail.show(*parts)

    def cursor_moved(self) -> None:
        self._show_detail()
        cut = len(self.rows) >= self._asked  # the last read stopped at its limit: there is more
        if cut and self.table.cursor_row >= len(self.rows) - self.table.body_height and self.is_current:
            self.show()  # near the last row read: read further now, not in half a second

    # -- keys -------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("toggle_host", "host_delay"):
            steerable = self.crawl_app.crawler.parts.steer is not None
            return True if self.crawl_app.live and steerable else None  # shown, dimmed
        return True

    def action_sort(self, step: int) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + step) % len(SORTS)]
        self.table.move_cursor(row=0)
        self.show()

    def action_filter(self, step: int) -> None:
        self.state = FILTERS[(FILTERS.index(self.state) + step) % len(FILTERS)]
        self.table.move_cursor(row=0)
        self.show()

    def _host(self) -> str | None:
        h = self.selected()
        if h is None:
            self.notify("No host selected", severity="warning", timeout=2)
        return h.host if h is not None else None

    def action_toggle_host(self) -> None:
        host = self._host()
        if host is not None:
            self.crawl_app.toggle_host(host)
            self.show()

    def action_host_delay(self) -> None:
        host = self._host()
        if host is not None:
            self.crawl_app.ask_host_delay(host, next((h.delay for h in self.rows if h.host == host), 0.0))

    def action_close(self) -> None:
        self.dismiss(None)
