"""Steering screens: the ignore, seed and host-delay prompts, the ignores screen (`I`)
and the queue view (`u`), plus the one-line trap warning of the main screen.

They call the crawl's steering part (core/surface.py `Steer`, core/steering/steer.py) and read
`queue_view()` and `ignores()`, both O(rows shown). A crawl without it (an attached
monitor) gets a notice instead of a crash.
"""
from __future__ import annotations

import datetime as dt
import inspect
from typing import Any, Protocol, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from ...core.monitor.queueview import QueueView, Trap, suggest
from .. import fmt
from ..panels.keybar import KeyBar
from ..widgets.line import Line
from ..widgets.table import Col, DiffTable, cell


def trap_parts(traps: tuple[Trap, ...] | list[Trap]) -> list:
    """The main screen's warning: the first trap, and how many more."""
    if not traps:
        return []
    first = traps[0]
    parts: list = [(" ⚠ trap? ", "bold reverse $warning"), " ", (first.reason, "bold $warning"), " ",
                   (first.prefix, "bold"), ("  " + first.detail, "dim")]
    if len(traps) > 1:
        parts += [(f"  (+{len(traps) - 1} more)", "dim")]
    parts += [("  u: queue view", "dim")]
    return parts


class Steering(Protocol):
    """What these screens ask of the app (CrawlApp), which imports them: typed, not imported."""

    def crawler_ignores(self) -> tuple[Any, ...]: ...
    def crawler_ignore_sets(self) -> tuple[Any, ...]: ...
    def action_ignore_set(self, value: str = "") -> None: ...
    def crawler_queue_view(self) -> Any: ...
    def action_ignore(self, value: str = "") -> None: ...
    def remove_ignore(self, pattern: str) -> None: ...


def steering(screen: Screen[Any]) -> Steering:
    return cast(Steering, screen.app)


class TextPrompt(ModalScreen[Any]):
    """One line of input; `apply(text)` returns None to close, or the reason it refused
    (shown under the input, nothing changes). It may be a coroutine function."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt-cancel")]

    def __init__(self, title: str, *, value: str = "", placeholder: str = "", help: str = "",
                 apply: Any = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.value = value
        self.placeholder = placeholder
        self.help_text = help or "enter to apply, escape to cancel"
        self.apply = apply
        self.refusal: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(Content(self.title_text), classes="dialog-title")
            yield Input(value=self.value, placeholder=self.placeholder, id=f"{self.id or 'prompt'}-input")
            yield Static(Content(""), id="prompt-error", classes="prompt-error")
            yield Static(Content(self.help_text), classes="dialog-help")
        yield KeyBar(hints=[("⏎", "Apply")])

    def on_mount(self) -> None:
        inp = self.query_one(Input)
        inp.cursor_blink = False
        inp.focus()

    @on(Input.Submitted)
    async def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.dismiss(None)
            return
        outcome = self.apply(text) if self.apply is not None else None
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            self.refusal = str(outcome)
            self.query_one("#prompt-error", Static).update(Content.styled(self.refusal, "$error"))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


# -- the ignores screen ---------------------------------------------------------------

class IgnoresTable(DiffTable):
    COLUMNS = (
        Col("pattern", "pattern", None, 16),
        Col("set", "set", 9),
        Col("added", "added", 9),
        Col("dropped", "dropped", 8, justify="right"),
        Col("stopped", "stopped", 8, justify="right"),
    )


def _clock(t: float) -> str:
    """UTC, as the records' fetched_at (and the same on every machine)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M:%SZ") if t else ""


class IgnoresScreen(Screen[None]):
    """Each ignore pattern: when added, queued URLs it dropped, later links it stopped."""

    BINDINGS = [
        Binding("escape", "close", "Back", id="ignores-back"),
        Binding("i", "add", "Add", id="ignores-add"),
        Binding("delete,d,backspace", "delete", "Delete", id="ignores-delete"),
        Binding("s", "toggle_set", "Set on/off", id="ignores-set"),
    ]

    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = IgnoresTable(id="ignores-table")
        yield self.heading
        yield self.table
        yield Static(Content.assemble(
            ("A pattern is an RE2 regex searched in the full URL. ", "dim"),
            ("dropped", "bold"),
            (": queued URLs taken off the queue when it was added (each recorded as Ignored). ", "dim"),
            ("stopped", "bold"), (": later links it kept out. Deleting a pattern admits later links again. ", "dim"),
            ("set", "bold"), (": the curated ignore set it came from (s turns a set on or off).", "dim"),
        ), id="ignores-note")
        yield KeyBar()

    def on_mount(self) -> None:
        self.show()
        self.table.focus()

    def show(self, snap: Any = None) -> None:
        rules = steering(self).crawler_ignores()
        on = [s.name for s in steering(self).crawler_ignore_sets() if s.on]
        self.heading.show(("Ignore patterns ", "bold"), str(len(rules)),
                          ("   queued URLs dropped ", "dim"), fmt.count(sum(r.dropped for r in rules)),
                          ("   links stopped ", "dim"), fmt.count(sum(r.stopped for r in rules)),
                          ("   sets on ", "dim"), ", ".join(on) or "none")
        self.table.sync((r.pattern, (cell(r.pattern, "bold"), cell(getattr(r, "source", ""), "dim"),
                                     cell(_clock(r.added), "dim"),
                                     cell(fmt.count(r.dropped)), cell(fmt.count(r.stopped))))
                        for r in rules)

    def action_toggle_set(self) -> None:
        key = self.table.selected_key()
        rule = next((r for r in steering(self).crawler_ignores() if r.pattern == key), None)
        steering(self).action_ignore_set(getattr(rule, "source", "") if rule is not None else "")

    def action_add(self) -> None:
        steering(self).action_ignore()

    def action_delete(self) -> None:
        pattern = self.table.selected_key()
        if pattern is None:
            self.notify("No pattern selected", severity="warning", timeout=2)
            return
        steering(self).remove_ignore(pattern)
        self.show()

    def action_close(self) -> None:
        self.dismiss(None)


# -- the queue view -------------------------------------------------------------------

class PrefixTable(DiffTable):
    COLUMNS = (
        Col("prefix", "prefix (host/dir/)", None, 16, flex=3),
        Col("queued", "queued", 7, justify="right"),
        Col("share", "share", 5, justify="right"),
        Col("growth", "+/min", 7, justify="right"),
        Col("pages", "pages", 6, justify="right", min_table=70),
        Col("outside", "out/pg", 6, justify="right", min_table=76),
    )


class NextTable(DiffTable):
    COLUMNS = (Col("n", "#", 3, justify="right"), Col("url", "next URLs to be fetched", None, 16, cut="middle"))


class QueueScreen(Screen[None]):
    """What is queued: top prefixes with growth, suspected traps, and the next URLs.
    `i` pre-fills the ignore prompt from the selected prefix or URL."""

    BINDINGS = [
        Binding("escape", "close", "Back", id="queue-back"),
        Binding("i", "ignore_selected", "Ignore this", id="queue-ignore"),
        Binding("tab", "app.focus_next", "Next table", show=False),
    ]

    def __init__(self, home: frozenset[str] = frozenset()) -> None:
        super().__init__(id="queue-view")
        self.home = home
        self.view: QueueView | None = None

    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.traps = Static(Content(""), id="queue-traps")
        self.prefixes = PrefixTable(id="queue-prefixes")
        self.next_urls = NextTable(id="queue-next")
        yield self.heading
        yield self.traps
        yield self.prefixes
        yield self.next_urls
        yield KeyBar()

    def on_mount(self) -> None:
        self.show()
        self.prefixes.focus()

    def show(self, snap: Any = None) -> None:
        view = steering(self).crawler_queue_view()
        if view is None:
            self.heading.show(("The queue view needs the engine in this process", "bold $warning"))
            return
        self.view = view
        flagged = {t.prefix for t in view.traps}
        self.heading.show(("Queue ", "bold"), (fmt.count(view.queued), "bold"), (" URLs", "dim"),
                          ("   top prefixes, growth over the last minute", "dim"),
                          ("   i: ignore the selected prefix or URL", "dim"))
        if view.traps:
            lines = [Content.assemble(("⚠ ", "bold $warning"), (t.reason, "bold $warning"), " ", (t.prefix, "bold"),
                                      ("  " + t.detail, "dim")) for t in view.traps[:4]]
            self.traps.update(Content("\n").join(lines))
            self.traps.display = True
        else:
            self.traps.update(Content.styled("no trap suspected", "dim"))
        # Keyed by rank, not by prefix: the table keeps a key's place, and this list re-sorts.
        self.prefixes.sync(
            (str(k), (
                cell(("⚠ " if p.prefix in flagged else "") + p.prefix, "bold $warning" if p.prefix in flagged else ""),
                cell(fmt.count(p.queued), "bold"),
                cell(f"{p.share:.0%}"),
                cell(f"{p.per_min:+.0f}" if p.per_min else "0", "$warning" if p.per_min > 0 else "dim"),
                cell(fmt.count(p.pages) if p.pages else "", "dim"),
                cell(f"{p.outside:.1f}" if p.pages else "", "dim"),
            ))
            for k, p in enumerate(view.prefixes)
        )
        self.next_urls.sync((str(k), (cell(k + 1, "dim"), cell(fmt.display_url(u, self.home))))
                            for k, u in enumerate(view.next_urls))

    def selected_target(self) -> str | None:
        """The prefix (host/dir/) or the URL under the cursor of the focused table."""
        if self.view is None:
            return None
        table, rows = ((self.next_urls, self.view.next_urls) if self.focused is self.next_urls
                       else (self.prefixes, [p.prefix for p in self.view.prefixes]))
        key = table.selected_key()
        return rows[int(key)] if key is not None and int(key) < len(rows) else None

    def action_ignore_selected(self) -> None:
        target = self.selected_target()
        steering(self).action_ignore(suggest(target) if target else "")

    def action_close(self) -> None:
        self.dismiss(None)
