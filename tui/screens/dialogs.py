"""Modal prompts and the full-screen lists: quit confirmation, concurrency prompt,
help, the error list and the merges/redirects list."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Static

from ...core.monitor.sanitize import clean
from ...core.monitor.stats import ErrorEvent, Snapshot
from .. import fmt
from ..panels.failures import kind_parts
from ..panels.keybar import KeyBar
from ..widgets.line import Line
from ..widgets.logtable import LogTable
from ..widgets.table import Cell, Col, cell


class ConfirmQuit(ModalScreen[bool | str]):
    """'Stop the crawl and quit?' y / n; and d (answer "detach") on an attached monitor.

    Like every dialog here, its help is its key bar: all of its keys, the way out pinned.
    `?` is no dialog's key (a prompt takes it as typed text), and the app's keys do not
    reach a modal screen, so the bar below it is covered by this one."""

    BINDINGS = [
        Binding("y,q,ctrl+c", "answer(True)", "Stop and quit", id="confirm-yes", priority=True, key_display="y"),
        Binding("n,escape", "cancel", "Keep crawling", id="confirm-no", priority=True),
        Binding("d", "detach", "Detach", id="confirm-detach", priority=True),
    ]

    def __init__(self, in_flight: int, queued: int, *, can_detach: bool = False, shared: bool = False) -> None:
        super().__init__(id="confirm-quit")
        self.in_flight = in_flight
        self.queued = queued
        self.can_detach = can_detach
        self.shared = shared  # a crawl on Redis: what is queued stays there

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content("The crawl is still running."), classes="dialog-title")
            yield Static(
                Content(
                    f"Stop it and quit? The {self.in_flight} fetches in flight are cancelled and put back, "
                    + (f"the {fmt.count(self.queued)} queued URLs stay in Redis "
                       "(for the other processes, or a later join), "
                       if self.shared else f"the {fmt.count(self.queued)} queued URLs are not fetched, ")
                    + "and every record is flushed."
                ),
                classes="dialog-body",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stop and quit (y)", id="yes", variant="error")
                if self.can_detach:
                    yield Button("Detach (d)", id="detach", variant="success")
                yield Button("Keep crawling (n)", id="no", variant="primary")
            help_text = "y or q again: stop and quit · n or escape: keep crawling"
            if self.can_detach:
                help_text = "y or q again: stop the crawl · d: detach, it goes on · n or escape: stay"
            yield Static(Content(help_text), classes="dialog-help")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_detach if action == "detach" else True

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_detach(self) -> None:
        if self.can_detach:
            self.dismiss("detach")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss("detach" if event.button.id == "detach" else event.button.id == "yes")


class ConcurrencyPrompt(ModalScreen[int | None]):
    """Type a number of workers."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt-cancel")]
    MAX = 10_000

    def __init__(self, current: int) -> None:
        super().__init__(id="concurrency-prompt")
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content(f"Concurrency (now {self.current}): how many workers?"), classes="dialog-title")
            yield Input(
                placeholder=str(self.current),
                type="integer",
                id="concurrency-input",
                max_length=5,
            )
            yield Static(Content("enter to apply, escape to cancel"), classes="dialog-help")
        yield KeyBar(hints=[("⏎", "Apply")])

    def on_mount(self) -> None:
        inp = self.query_one(Input)
        inp.cursor_blink = False
        inp.focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip() or str(self.current)
        try:
            n = int(text)
        except ValueError:
            n = 0
        if not 1 <= n <= self.MAX:
            self.notify(f"Type a number from 1 to {self.MAX}", severity="warning")
            return
        self.dismiss(n)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the app's bindings so it cannot drift."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help-close")]

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__(id="help")
        self.keys = keys

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in self.keys) + 2
        parts: list = [("crawltop keys\n\n", "bold")]
        for key, what in self.keys:
            parts += [(key.ljust(width), "bold $accent"), what, "\n"]
        parts += ["\n", ("escape / ? closes this help", "dim")]
        with VerticalScroll(classes="dialog help-dialog"):
            yield Static(Content.assemble(*parts), id="help-text")
        yield KeyBar()

    def action_close(self) -> None:
        self.dismiss(None)


# -- full lists -----------------------------------------------------------------

class EventTable(LogTable):
    limit = 5000
    hard_limit = 10000
    interval = 0.0  # the person is looking at this list: show rows as they come


class EventListScreen(Screen[None]):
    """A scrollable, filterable list of events that keeps growing while shown."""

    BINDINGS = [
        Binding("escape", "close", "Back", id="list-back"),
        Binding("slash", "focus_filter", "Filter", id="list-filter", key_display="/"),
        Binding("ctrl+l", "clear_filter", "Clear filter", id="list-clear"),
    ]
    TITLE = ""
    COLUMNS: Sequence[Col] = ()

    def __init__(self, snap: Snapshot, *, id: str, home: frozenset[str] = frozenset()) -> None:
        super().__init__(id=id)
        self.home = home  # URLs on the roots' hosts are shown by path (the heading says which host)
        self._events: dict[str, tuple[tuple[Cell, ...], str]] = {}  # key -> (cells, haystack)
        self._filter = ""
        self._first = snap
        self._shown = snap  # the app's newest snapshot, as last shown here

    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        table = EventTable(id=f"{self.id}-table", show_header=True)
        table.COLUMNS = self.COLUMNS
        self.table = table
        yield self.heading
        yield Input(placeholder="filter: type to narrow by URL, reason or message", id=f"{self.id}-filter")
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(Input).cursor_blink = False
        self.show(self._first)
        self.table.focus()

    # subclasses: which events, their key/seq, their cells and searchable text
    def events(self, snap: Snapshot) -> Iterable[Any]:
        raise NotImplementedError

    def describe(self, event: Any) -> tuple[str, tuple[Cell, ...], str]:
        """(unique key, cells, lower-case searchable text)."""
        raise NotImplementedError

    def heading_parts(self, snap: Snapshot) -> list:
        raise NotImplementedError

    def home_note(self) -> list:
        hosts = sorted(h for h in self.home if not h.startswith("www."))
        return [("   paths on ", "dim"), ", ".join(hosts)] if hosts else []

    def _matches(self, haystack: str) -> bool:
        return not self._filter or self._filter in haystack

    def show(self, snap: Snapshot) -> None:
        self._shown = snap
        self.heading.show(*self.heading_parts(snap), *self._filter_note())
        new = []
        for ev in self.events(snap):
            key, cells, hay = self.describe(ev)
            if key in self._events:
                continue
            self._events[key] = (cells, hay)
            if self._matches(hay):
                new.append((key, cells))
        if len(self._events) > EventTable.hard_limit:
            for key in list(self._events)[: len(self._events) - EventTable.hard_limit]:
                del self._events[key]
        self.table.append(new)

    def _filter_note(self) -> list:
        if not self._filter:
            return []
        shown = self.table.row_count
        return [("   filter ", "dim"), (repr(self._filter), "bold"), (f" {shown} shown", "dim")]

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        self._filter = event.value.strip().lower()
        table = self.table
        table.clear_rows()  # a person typed: rebuilding here is not per frame
        table.upsert((k, cells) for k, (cells, hay) in self._events.items() if self._matches(hay))
        if table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self.app.call_later(self._refresh_heading)

    def _refresh_heading(self) -> None:
        self.heading.show(*self.heading_parts(self._shown), *self._filter_note())

    @on(Input.Submitted)
    def _filter_done(self) -> None:
        self.table.focus()

    def action_focus_filter(self) -> None:
        # set_focus now, not focus() (which waits a turn): the next keys typed go in the filter
        self.set_focus(self.query_one(Input))

    def action_clear_filter(self) -> None:
        self.query_one(Input).value = ""

    def action_close(self) -> None:
        self.dismiss(None)


class ErrorListScreen(EventListScreen):
    """Every recent error; the line under the table says where the selected one was found
    (`via`), and `v` narrows the list to that page: its own error and the errors of every
    link found on it (the filter matches a row's URL or its via)."""

    BINDINGS = [
        Binding("v", "filter_via", "Filter by its page", id="list-via",
                tooltip="Show only errors found on the page the selected error came from"),
    ]
    COLUMNS = (
        Col("seq", "#", 5, justify="right"),
        Col("at", "at", 7, justify="right"),
        Col("kind", "reason", 22),
        Col("tries", "try", 3, justify="right"),
        Col("url", "url", None, 12, flex=3, cut="middle"),
        Col("message", "message", None, 10, flex=2),
    )

    def __init__(self, snap: Snapshot, home: frozenset[str] = frozenset()) -> None:
        super().__init__(snap, id="error-list", home=home)
        self._via: dict[str, str | None] = {}  # row key -> the page it came from
        self._via_key: str | None = ""  # the row the via line shows

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, KeyBar):
                self.via_line = Line(id="error-via", classes="via-line")
                yield self.via_line
            yield widget

    def on_mount(self) -> None:
        super().on_mount()
        self._show_via()
        # The table posts no message when its cursor moves; a cheap poll (one dict
        # lookup, a repaint only on change) keeps tui/widgets/table.py untouched.
        self.set_interval(0.1, self._show_via)

    def _selected_via(self) -> tuple[str | None, str | None]:
        key = self.table.selected_key()
        return key, self._via.get(key) if key is not None else None

    def _show_via(self) -> None:
        key, via = self._selected_via()
        if key == self._via_key:
            return
        self._via_key = key
        if key is None:
            self.via_line.show("")
        elif via is None:
            self.via_line.show(("found on ", "dim"), ("no page: a root or a sitemap", "italic"))
        else:
            self.via_line.show(("found on ", "dim"), (clean(via, 2000), "bold"), ("   v: errors of that page", "dim"))

    def action_filter_via(self) -> None:
        _key, via = self._selected_via()
        if via:
            self.query_one(Input).value = clean(via, 2000)
            self.table.focus()

    def events(self, snap: Snapshot) -> Iterable[ErrorEvent]:
        return snap.recent_errors

    def describe(self, e: ErrorEvent) -> tuple[str, tuple[Cell, ...], str]:
        cells = (
            cell(e.seq, "dim"),
            cell(fmt.duration(e.at), "dim"),
            cell(e.kind, "red"),
            cell(e.tries or "", "yellow" if e.tries > 1 else ""),
            cell(fmt.display_url(e.url, self.home)),
            cell(e.message, "dim"),
        )
        via = e.via
        self._via[str(e.seq)] = via
        hay = clean(f"{e.url} {e.kind} {e.message} {via or ''}", 4000).lower()
        return str(e.seq), cells, hay

    def heading_parts(self, snap: Snapshot) -> list:
        parts = kind_parts(snap.errors_by_kind, snap.errors) + self.home_note()
        if snap.errors > len(snap.recent_errors):
            parts += [("   (latest ", "dim"), str(len(snap.recent_errors)), (" kept)", "dim")]
        return parts


class MergeListScreen(EventListScreen):
    """Redirect merges (target already seen), plus plain redirects if the engine keeps them."""

    COLUMNS = (
        Col("seq", "#", 5, justify="right"),
        Col("at", "at", 7, justify="right"),
        Col("kind", "kind", 8),
        Col("status", "st", 3),
        Col("source", "from", None, 12, cut="middle"),
        Col("target", "target", None, 12),
    )

    def __init__(self, snap: Snapshot, home: frozenset[str] = frozenset()) -> None:
        super().__init__(snap, id="merge-list", home=home)

    def events(self, snap: Snapshot) -> Iterable[Any]:
        redirects = snap.recent_redirects
        if not redirects:
            return snap.recent_merges
        tagged = [("merge", m) for m in snap.recent_merges] + [("redirect", r) for r in redirects]
        tagged.sort(key=lambda t: t[1].at)
        return tagged

    def describe(self, ev: Any) -> tuple[str, tuple[Cell, ...], str]:
        kind, m = ev if isinstance(ev, tuple) else ("merge", ev)
        cells = (
            cell(m.seq, "dim"),
            cell(fmt.duration(m.at), "dim"),
            cell(kind, "cyan" if kind == "merge" else ""),
            cell(m.status or "", "dim"),
            cell(fmt.display_url(m.source, self.home)),
            cell(fmt.display_url(m.target, self.home), "cyan"),
        )
        hay = clean(f"{kind} {m.status} {m.source} {m.target}", 4000).lower()
        return f"{kind[0]}{m.seq}", cells, hay

    def heading_parts(self, snap: Snapshot) -> list:
        return [
            ("Redirect merges ", "bold"), (fmt.count(snap.merges), "bold"),
            ("  redirects ", "dim"), fmt.count(snap.redirects),
            *self.home_note(),
            ("   a merge is a redirect whose target was already seen", "dim"),
        ]
