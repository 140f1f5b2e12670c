"""`crawltop` alone: every crawl of this user on this machine on one screen, htop-style.

The model is core/dashboard/board.py `Board`: one link per live crawl asking for an O(1)
summary, the summaries ended crawls left, lost ones. This app reads it on a timer (2 Hz,
re-armed after each refresh, like the monitor's) and acts on the selected crawl with the
main screen's own actions (tui/actions.py: the same keys and words). `enter` ends this
app with `Open(name)`: the caller (cli/commands/top.py) runs the crawl's monitor, the
screen of `attach`, and opens the dashboard again when it is left (esc or d), on the same
board, so nothing is read twice.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Input

from ...core.dashboard.board import Board, Row
from ...core.errors import RemoteError
from ...core.monitor import browsertext
from ...core.monitor.sanitize import clean
from ...core.outcomes import outcome_line
from .. import fmt
from ..actions import TOP_ENABLED, TOP_NAV, bindings, help_lines, top_actions
from ..palette import TopCommands
from ..panels.keybar import KeyBar
from ..screens.dialogs import HelpScreen
from ..screens.steer import TextPrompt
from ..terminal import driver_class
from ..widgets.line import Line
from .dialogs import ConfirmDismiss, ConfirmStop, NewCrawlPrompt
from .launch import browser_refusal, parse_command, parse_secrets, start_crawl
from .table import SORTS, CrawlsTable, cells, host_numbers, sorted_rows

REFRESH = 0.5  # seconds: 2 Hz, the floor; a summary is O(1), so more would be cheap too
MAX_CONCURRENCY = 10_000
ORDER = tuple(SORTS)


@dataclass(frozen=True)
class Open:
    """What the app returns for `enter`: open this crawl's monitor."""

    name: str


class TopApp(App[Open | None]):
    """The dashboard."""

    TITLE = "crawltop"
    CSS_PATH = ["../app.tcss", "top.tcss"]
    COMMANDS = App.COMMANDS | {TopCommands}
    BINDINGS = bindings(top_actions())

    def __init__(self, board: Board, *, cwd: Path | None = None, can_start: bool = True,
                 refresh: float = REFRESH, selected: str | None = None, sort: str = "name") -> None:
        super().__init__(driver_class=driver_class())
        self.board = board
        self.cwd = cwd or Path.cwd()
        self.can_start = can_start
        self.interval = refresh
        self.sort = sort
        self.filter_text = ""
        self.frames = 0  # refreshes done (tests and the benchmark read them)
        self._selected = selected
        self._binding_key: tuple = ()

    def compose(self) -> ComposeResult:
        self.heading = Line(id="top-heading")
        self.filter_input = Input(placeholder="filter: name, state or root (escape clears)", id="top-filter")
        self.table = CrawlsTable(id="crawls")
        self.detail = Line(id="top-detail")
        yield self.heading
        yield self.filter_input
        yield self.table
        yield self.detail
        yield KeyBar()

    async def on_mount(self) -> None:
        self.table.on_moved = self._selection_moved
        self.filter_input.cursor_blink = False
        self.table.focus()
        await self.refresh_now()
        if self._selected is not None and self._selected in self.table.row_keys():
            self.table.move_cursor(row=self.table.get_row_index(self._selected))
        self.run_worker(self._refresh_loop(), name="crawltop-top-refresh", group="refresh", exclusive=True)

    async def _refresh_loop(self) -> None:
        """One refresh, then sleep: a slow one delays the next, they never overlap."""
        while True:
            await asyncio.sleep(self.interval)
            await self.refresh_now()

    # -- the picture ---------------------------------------------------------------
    async def refresh_now(self) -> None:
        await self.board.tick(shown=self._shown())
        self.frames += 1
        self.show()

    def _shown(self) -> set[str] | None:
        """The crawls whose rows are on the screen (and the selected one); None before layout."""
        height = self.table.body_height if self.table.size.height else 0
        if not height:
            return None
        top = int(self.table.scroll_offset.y)
        shown = set(self.table.row_keys()[max(0, top - 1):top + height + 1])  # a row either side
        selected = self.table.selected_key()
        if selected is not None:
            shown.add(selected)
        return shown

    @property
    def rows(self) -> list[Row]:
        return sorted_rows(list(self.board.rows.values()), self.sort, self.filter_text)

    def show(self) -> None:
        rows = self.rows
        with self.batch_update():
            self.table.sync((r.name, cells(r)) for r in rows)
            self.table.order([r.name for r in rows])
            self._show_heading()
        for name in self.board.lost_now:
            self.notify(f"{name} is lost: its process ended without finishing (killed or crashed); "
                        "its socket is removed", title="crawl lost", severity="error", timeout=10, markup=False)
        self.board.lost_now.clear()
        self._selection_moved()

    def _selection_moved(self) -> None:
        self._show_detail()
        key = self._bindings_state()
        if key != self._binding_key:
            self._binding_key = key
            self.refresh_bindings()

    def _show_heading(self) -> None:
        rows = list(self.board.rows.values())
        live = [r for r in rows if r.live]
        paused = sum(1 for r in live if r.paused or r.state == "PAUSED")
        rate = sum(r.summary.rate_now for r in live if r.summary is not None)
        parts: list[Any] = [(" crawltop ", "bold"), f" {len(live) - paused} running" if live else " no crawl running"]
        if paused:
            parts.append((f", {paused} paused", "$warning"))
        ended = len(rows) - len(live)
        if ended:
            parts.append(f" · {ended} ended")
        if live:
            parts.append(f" · {fmt.rate(rate)}")
        parts.append((f" · sorted by {self.sort}", "dim"))
        if self.filter_text:
            parts.append((f" · filter {clean(self.filter_text, 40)!r}", "$accent"))
        if self.board.redis_problem:
            parts.append((f" · {clean(self.board.redis_problem, 120)}", "bold $error"))
        self.heading.show(*parts)

    def _show_detail(self) -> None:
        row = self.selected_row()
        if row is None:
            hint = "n starts a crawl" if self.can_start else "start one with crawltop crawl URL --detach"
            self.detail.show((" no crawls: ", "dim"), hint)
            return
        s = row.summary
        state = f"stopped by {row.by}" if row.how == "stopped" and row.by else row.state
        first: list[Any] = [(f" {row.name}", "bold"), f"  {state}"]
        if row.mode and row.live:
            first.append((f" ({row.mode})", "dim"))
        if row.pid:
            first.append((f"  pid {row.pid}", "dim"))
        if s is not None and row.live:
            first.append((f"  {s.concurrency} workers", "dim"))
            first += browser_parts(s.browser)
        hosts = host_numbers(row)
        if hosts is not None:
            first.append((f"  hosts: {hosts[0]} ready, {hosts[1]} waiting, {hosts[2]} backing off", "dim"))
        if s is not None and s.notice:
            first.append((f"  {s.notice}", "$warning"))
        second = f" {outcome_line(s.outcomes, s.fetched_classes)}" if s is not None else " no numbers yet"
        self.detail.show(*first, "\n", (second, "" if row.live else "dim"), ("  " + row.root, "dim"))

    # -- the selection -----------------------------------------------------------------
    def selected_row(self) -> Row | None:
        key = self.table.selected_key()
        return self.board.rows.get(key) if key is not None else None

    def _bindings_state(self) -> tuple:
        """What check_action reads (tui/actions.py `Listing`): a change refreshes the key bar."""
        row = self.selected_row()
        if row is None:
            return (None, self.any_ended)
        workers = self.selected_workers
        return (row.name, self.selected_live, self.selected_paused, workers is None or workers <= 1,
                self.selected_shared, self.typing_filter, self.any_ended)

    def on_descendant_focus(self) -> None:
        self._binding_key = ()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Each row's own predicate (tui/actions.py TOP_ENABLED). An action outside the table
        (Textual's focus moves, the palette) runs unless the filter line has the keyboard: tab
        must not carry the typing away from it; the palette stays open to it."""
        enabled = TOP_ENABLED.get(action)
        if enabled is None:
            return action == "command_palette" or not self.typing_filter
        return enabled(self)

    # -- what the predicates read (tui/actions.py `Listing`) ------------------------------
    @property
    def typing_filter(self) -> bool:
        return self.filter_input.has_focus

    @property
    def selected_live(self) -> bool:
        row = self.selected_row()
        return row is not None and self.board.can_command(row.name)

    @property
    def selected_paused(self) -> bool:
        row = self.selected_row()
        return row is not None and (row.paused or row.state == "PAUSED")

    @property
    def selected_workers(self) -> int | None:
        row = self.selected_row()
        return None if row is None or row.summary is None else row.summary.concurrency

    @property
    def selected_shared(self) -> bool:
        row = self.selected_row()
        return row is not None and row.mode == "redis"

    @property
    def selected_ended(self) -> bool:
        row = self.selected_row()
        return row is not None and not row.live

    # -- actions ------------------------------------------------------------------------
    def _live_name(self) -> str | None:
        row = self.selected_row()
        if row is None or not row.live:
            self.notify("Select a running crawl", severity="warning", timeout=2)
            return None
        return row.name

    def _command(self, name: str, op: str, done: str | None = None, **args: Any) -> None:
        """A key's command, in a worker: the keys stay live while a crawl is slow to answer
        (Link.request gives up after core/sockets/watch.py REQUEST_TIMEOUT)."""
        self.run_worker(self._send(name, op, done, **args), group="commands")

    async def _send(self, name: str, op: str, done: str | None = None, **args: Any) -> Any:
        try:
            result = await self.board.command(name, op, **args)
        except RemoteError as exc:
            self.notify(f"{name}: {exc}", severity="error", timeout=4, markup=False)
            return None
        if done:
            self.notify(done, timeout=3, markup=False)
        await asyncio.sleep(0.05)  # the reply's summary, asked for with the command
        self.show()
        return result

    async def action_open(self) -> None:
        name = self._live_name()
        if name is not None:
            self.exit(Open(name))

    async def action_pause(self) -> None:
        name = self._live_name()
        if name is not None:
            self.board.rows[name].paused = True
            self._command(name, "pause", f"{name} paused: no new fetches; those in flight finish")

    async def action_resume(self) -> None:
        name = self._live_name()
        if name is not None:
            self.board.rows[name].paused = False
            self._command(name, "resume", f"{name} resumed")

    async def _concurrency(self, step: int) -> None:
        name = self._live_name()
        row = self.board.rows.get(name or "")
        if name is None or row is None or row.summary is None:
            return
        n = max(1, min(MAX_CONCURRENCY, row.summary.concurrency + step))
        if n != row.summary.concurrency:
            self._command(name, "set_concurrency", f"{name}: {n} workers", n=n)

    async def action_more(self, step: int = 1) -> None:
        await self._concurrency(step)

    async def action_fewer(self, step: int = 1) -> None:
        await self._concurrency(-step)

    def action_stop(self) -> None:
        name = self._live_name()
        if name is None:
            return
        row = self.board.rows[name]

        def answer(yes: bool | None) -> None:
            if yes:
                self._command(name, "stop", f"Stop sent to {name}: in-flight work is put back, records flushed")

        self.push_screen(ConfirmStop(name, row.summary.queued if row.summary else 0), answer)

    def action_ignore(self) -> None:
        name = self._live_name()
        if name is None:
            return

        async def apply(pattern: str) -> str | None:
            try:
                result = await self.board.command(name, "ignore_add", pattern=pattern)
            except RemoteError as exc:
                return str(exc)
            if not isinstance(result, dict) or not result.get("ok"):
                return str(result.get("error") if isinstance(result, dict) else result)
            self.notify(f"{name}: ignoring {pattern}: {fmt.count(int(result.get('dropped', 0)))} queued URLs dropped",
                        timeout=4, markup=False)
            return None

        self.push_screen(TextPrompt(f"{name}: ignore URLs matching (RE2 regex, searched in the full URL):",
                                    placeholder=r"^https?://example\.com/calendar/", apply=apply, id="ignore-prompt"))

    def action_new(self) -> None:
        if not self.can_start:
            self.notify("Starting crawls is off here (crawltop web --all --allow-start turns it on)",
                        severity="warning", timeout=4)
            return

        async def start(line: str, secret: str) -> str | None:
            try:
                args, secrets = parse_command(line), parse_secrets(secret)
            except ValueError as exc:
                return str(exc)
            refusal = browser_refusal(args, self.cwd)
            if refusal is not None:
                return refusal
            ok, said = await start_crawl(args, secrets, self.cwd)
            if not ok:
                return said
            self.notify(f"Started {said} (detached)", timeout=4, markup=False)
            self.board.look_now()
            self._selected = said
            await self.refresh_now()
            if said in self.table.row_keys():
                self.table.move_cursor(row=self.table.get_row_index(said))
            return None

        self.push_screen(NewCrawlPrompt(start, str(self.cwd)))

    def action_dismiss(self) -> None:
        row = self.selected_row()
        if row is not None and self.board.dismiss(row.name):
            self.show()

    @property
    def any_ended(self) -> bool:
        return any(not r.live for r in self.board.rows.values())

    def ended_names(self) -> list[str]:
        """Every ended crawl on the board (filtered out of view or not), in the list's order."""
        return [r.name for r in sorted_rows(list(self.board.rows.values()), self.sort, "") if not r.live]

    def action_dismiss_all(self) -> None:
        """X: dismiss every ended crawl, as x one, after a yes; the question names them, and
        only those go (one that ends while it is asked stays)."""
        names = self.ended_names()
        if not names:
            self.notify("No ended crawl to dismiss", severity="warning", timeout=2)
            return

        def answer(yes: bool | None) -> None:
            if yes:
                gone = [name for name in names if self.board.dismiss(name)]
                self.notify(f"{len(gone)} ended crawl{'s' if len(gone) != 1 else ''} dismissed", timeout=3)
                self.show()

        self.push_screen(ConfirmDismiss(names), answer)

    def action_sort(self, step: int = 1) -> None:
        self.sort = ORDER[(ORDER.index(self.sort) + step) % len(ORDER)]
        self.show()

    def action_filter(self) -> None:
        self.filter_input.add_class("-on")
        self.filter_input.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input is self.filter_input:
            self.filter_text = event.value.strip()
            self.show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.filter_input:
            self.table.focus()

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.filter_input.has_focus or (
                event.key == "escape" and self.filter_text and self.screen is self.screen_stack[0]):
            event.stop()
            self.filter_input.value = ""
            self.filter_text = ""
            self.filter_input.remove_class("-on")
            self.table.focus()
            self.show()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(help_lines(None, top_actions(), TOP_NAV)))

    async def action_quit(self) -> None:
        self.exit(None)


def browser_parts(numbers: dict[str, int]) -> list[Any]:
    """A --browser crawl's Chromium memory and restarts, worded as its Workers panel's title
    (tui/panels/workers.py) has them; nothing for a crawl without a browser."""
    if not numbers:
        return []
    mem, limit = numbers.get("memory", 0), numbers.get("memory_limit", 0)
    near = limit and mem > 0.8 * limit
    return [("  chromium ", "dim"), (browsertext.memory(mem), "bold $warning" if near else ""),
            ("  restarts ", "dim"), str(numbers.get("restarts", 0))]
