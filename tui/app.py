"""crawltop's live monitor: a Textual app that runs the crawl on its own loop and steers it.

The app *pulls*: a timer (4 Hz by default, the low end of a live view's 4-10 Hz:
each frame costs CPU the crawl could use) that is re-armed only after the previous
refresh finished reads one `Stats.snapshot()` and hands it to every panel inside
`batch_update()`. The engine never posts anything to the UI, and the panels diff their
rows, so the cost per frame is O(workers + rows shown), not O(pages crawled).

Entry points for the CLI: `run_tui(crawler, exit_on_finish=...)` (blocking) and
`await run_tui_async(crawler, exit_on_finish=...)` (when the caller already runs a loop,
e.g. with the demo site on it).

The keys: tui/actions.py (each row with when it can run; check_action looks it up); the
steering keys' methods: tui/steering.py, a base class of CrawlApp.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from textual.app import App, ComposeResult
from textual.command import CommandPalette
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.timer import Timer

from ..core import runloop
from ..core.errors import describe
from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.surface import Monitor
from . import fmt
from .actions import ENABLED, bindings, help_lines
from .pace import Pace, machine_idle
from .palette import CrawlCommands
from .panels.breakdown import BreakdownPanel
from .panels.failures import ErrorsPanel
from .panels.keybar import KeyBar
from .panels.merges import MergesPanel
from .panels.processes import ProcessesPanel
from .panels.sparks import SparkPanel
from .panels.status import StatusBar
from .panels.summary import SummaryScreen, summary_content
from .panels.workers import WorkersPanel, WorkersTable
from .screens.dialogs import (
    ConcurrencyPrompt,
    ConfirmQuit,
    ErrorListScreen,
    EventListScreen,
    HelpScreen,
    MergeListScreen,
)
from .screens.steer import IgnoresScreen, QueueScreen, trap_parts
from .steering import SteerActions
from .terminal import driver_class
from .widgets.line import Line

MAX_CONCURRENCY = 10_000
LIVE = ("RUNNING", "PAUSED")


class HangupPolicy(Protocol):
    """What a same-loop crawl does when its terminal goes away (cli/hangup.py)."""

    stop: bool  # True: stop cleanly as `q` would; False: go on detached

    def moved(self, reason: str) -> None: ...  # stdio off the dead terminal, at once
    async def carry_on(self, crawler: Monitor, task: asyncio.Task[Any]) -> None: ...  # the crawl, detached


class CrawlApp(SteerActions):
    """htop for a crawl: watch it and steer it from the keyboard."""

    TITLE = "crawltop"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {CrawlCommands}
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (18, "-short"), (34, "-tall")]

    BINDINGS = bindings()  # tui/actions.py: the key bar, help and palette read the same table
    _timer: Timer | None  # the next refresh (_tick)

    def __init__(
        self,
        crawler: Monitor,
        *,
        exit_on_finish: bool = False,
        refresh_hz: float = 4.0,
        adaptive: bool = True,
        hangup: HangupPolicy | None = None,
        from_list: bool = False,
    ) -> None:
        super().__init__(driver_class=driver_class())
        self.from_list = from_list  # opened from the dashboard: esc (and d) go back to it
        self.crawler = crawler
        self.hangup = hangup
        self.hung_up: str | None = None  # why the terminal is gone, once it is
        self.exit_on_finish = exit_on_finish
        self.refresh_interval = 1.0 / max(0.5, min(refresh_hz, 30.0))
        remote = crawler.parts.detach is not None  # a monitor in its own process: mind the machine
        self.pace = Pace(self.refresh_interval, idle=machine_idle() if remote else None) if adaptive else None
        self.crawl_task: asyncio.Task[Any] | None = None
        self.last_snapshot: Snapshot | None = None
        self.failure: str | None = None
        self.frames = 0  # refreshes done (tests and the benchmark read it)
        self._stopping = False
        self._finished = False
        self._binding_key: tuple = ()
        self._timer: Timer | None = None

    # -- layout ----------------------------------------------------------------
    def compose(self) -> ComposeResult:
        self.status_bar = StatusBar(id="status")
        self.trap_warning = Line(id="trap-warning")
        self.sparks = SparkPanel(id="sparks")
        self.breakdown = BreakdownPanel(id="breakdown")
        self.workers_panel = WorkersPanel(id="workers")
        self.errors_panel = ErrorsPanel(id="errors")
        self.merges_panel = MergesPanel(id="merges")
        yield self.status_bar
        yield self.trap_warning
        with Horizontal(id="top"):
            yield self.sparks
            yield self.breakdown
        yield self.workers_panel
        self.processes_panel = ProcessesPanel(id="processes") if self.cluster else None
        if self.processes_panel is not None:
            yield self.processes_panel
        with Horizontal(id="bottom"):
            yield self.errors_panel
            yield self.merges_panel
        yield KeyBar()

    @property
    def workers_table(self) -> WorkersTable:
        return self.workers_panel.table

    def on_mount(self) -> None:
        home = fmt.home_hosts(self.crawler.config.roots)
        self.errors_panel.home = self.merges_panel.home = home
        self.workers_table.focus()
        self._binding_key = self._bindings_state()  # the key bar was just drawn with these
        self._tick()
        # Start the crawl once the first screen is painted: the one-off work of styling
        # and laying out the app (~0.25 s of CPU) then doesn't compete with the crawl.
        self.call_after_refresh(self._start_crawl)

    def _start_crawl(self) -> None:
        if self.crawl_task is None and not self._exit:
            self.crawl_task = asyncio.create_task(self.crawler.crawl(), name="crawltop-crawl")
            self.crawl_task.add_done_callback(self._crawl_done)

    def on_unmount(self) -> None:
        # The app is going away without the quit dialog (an error, or a test ending):
        # never leave the crawl running behind it. The caller awaits crawl_task.
        if self.hung_up and self.hangup is not None and not self.hangup.stop:
            return  # run_tui_async carries the crawl on, detached
        if self.crawl_task is not None and not self.crawl_task.done() and not self._stopping:
            detach = self.crawler.parts.detach
            if detach is not None:  # a crawl in another process outlives its monitor
                detach.detach()
                return
            self._stopping = True
            self.crawler.stop()

    # -- the terminal ------------------------------------------------------------
    def hang_up(self, reason: str) -> None:
        """The terminal is gone (tui/terminal.py says why): move stdio off it, close the
        screen. A same-loop crawl then goes on detached or stops (the HangupPolicy); an
        attached monitor just ends, leaving its crawl running."""
        if self.hung_up:
            return
        self.hung_up = reason
        if self.hangup is not None:
            self.hangup.moved(reason)
        else:
            from .terminal import to_devnull

            to_devnull()
        self.exit(self.exit_code)

    def _display(self, screen: Any, renderable: Any) -> None:
        """Mark what Textual writes here as a frame: the only output that may be dropped."""
        frame = getattr(self._driver, "frame", None)
        if frame is None:
            return super()._display(screen, renderable)
        frame(True)
        try:
            super()._display(screen, renderable)
        finally:
            frame(False)

    # -- the refresh loop ------------------------------------------------------
    def _tick(self) -> None:
        """One refresh, then re-arm: a slow frame delays the next, frames never overlap."""
        if self._exit or not self.screen_stack:
            return
        try:
            self.refresh_now()
        finally:
            if self.is_running and not self._exit:
                interval = self.pace.next() if self.pace is not None else self.refresh_interval
                self._timer = self.set_timer(interval, self._tick, name="crawltop-refresh")

    def refresh_now(self) -> Snapshot:
        """Read one snapshot and show it everywhere (also called right after a key)."""
        snap = self.crawler.stats.snapshot()
        self.last_snapshot = snap
        self.frames += 1
        with self.batch_update():
            self.status_bar.show_snapshot(snap)
            self.sparks.show(snap)
            self.breakdown.show(snap)
            self.workers_panel.show(snap)
            self.errors_panel.show(snap)
            self.merges_panel.show(snap)
            cluster = self.crawler.parts.cluster
            if self.processes_panel is not None and cluster is not None:
                self.processes_panel.show(cluster.processes(), cluster.nodes())
            screen = self.screen
            if isinstance(screen, (EventListScreen, IgnoresScreen, QueueScreen)) and screen.is_mounted:
                screen.show(snap)
            if self.frames % 4 == 1:  # about once a second: the trap warning line
                self._show_traps()
        key = self._bindings_state()
        if key != self._binding_key:  # the key bar redraws on this: only on a real change
            self._binding_key = key
            self.refresh_bindings()
        return snap

    def _bindings_state(self) -> tuple:
        """Everything check_action depends on, but the screen and focus (Textual watches those)."""
        return (self.crawler.stats.state, self.crawler.paused, self.crawler.concurrency <= 1, self.live, self._finished)

    # -- crawl lifecycle ---------------------------------------------------------
    @property
    def state(self) -> str:
        if self._stopping and self.crawl_task is not None and not self.crawl_task.done():
            return "STOPPING"
        return self.crawler.stats.state

    @property
    def live(self) -> bool:
        return (
            not self._stopping
            and (self.crawl_task is None or not self.crawl_task.done())  # None: starting
            and self.crawler.stats.state in LIVE
        )

    def _crawl_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self.failure = "the crawl task was cancelled"
        elif (exc := task.exception()) is not None:
            self.failure = describe(exc)
        if self.is_running:
            self.call_later(self._on_finished)

    def _on_finished(self) -> None:
        if self._finished or self._exit or not self.screen_stack:
            return
        self._finished = True
        snap = self.refresh_now()
        if self.failure:
            self.notify(clean(self.failure, 300), title="crawl failed", severity="error", timeout=30, markup=False)
        if self._stopping or self.exit_on_finish:
            self.exit(self.exit_code)
            return
        while len(self.screen_stack) > 1 and isinstance(self.screen, ModalScreen):
            self.pop_screen()  # a question about a running crawl (or the palette) is moot now
        self.push_screen(self._summary_screen(snap))

    def _summary_screen(self, snap: Snapshot) -> SummaryScreen:
        top = self.crawler.stats.top_error_urls(10)
        return SummaryScreen(summary_content(snap, top, failure=self.failure))

    @property
    def exit_code(self) -> int:
        return 1 if self.failure else 0

    def stop_crawl(self) -> None:
        """Stop cleanly, wait for the records to be flushed, then exit."""
        if self._stopping:
            return
        self._stopping = True
        self.crawler.stop()
        self.refresh_now()
        self.run_worker(self._finish_and_exit(), name="crawltop-stop", group="stop", exclusive=True)

    async def _finish_and_exit(self) -> None:
        task = self.crawl_task
        if task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)
        self.exit(self.exit_code)

    # -- actions -------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Each row's own predicate (tui/actions.py `enabled`); an action outside the table runs."""
        enabled = ENABLED.get(action)
        return True if enabled is None else enabled(self)

    # -- what the predicates read (tui/actions.py `Now`) ---------------------------------
    @property
    def paused(self) -> bool:
        return self.crawler.paused

    @property
    def concurrency(self) -> int:
        return self.crawler.concurrency

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def looking_at(self) -> object:
        """The screen the person is looking at, under the command palette if it is open."""
        for screen in reversed(self.screen_stack):
            if not isinstance(screen, CommandPalette):
                return screen
        return self.screen

    @property
    def on_main(self) -> bool:
        return self.looking_at is self.screen_stack[0]

    @property
    def focus(self) -> str | None:
        """The main screen's panel with the keyboard, by name: its keys act on its selected row."""
        focused = self.screen_stack[0].focused
        if focused is None:
            return None
        if focused is self.workers_table:
            return "workers"
        if focused is self.breakdown.hosts:
            return "hosts"
        panel = self.processes_panel
        return "processes" if panel is not None and focused is panel.table else None


    @property
    def cluster(self) -> bool:
        """A crawl shared through Redis: the processes panel and its keys."""
        return self.crawler.parts.cluster is not None

    @property
    def can_detach(self) -> bool:
        """A crawler in another process (core/sockets/client.py) can be left running: `d`."""
        return self.crawler.parts.detach is not None

    def action_detach(self) -> None:
        detach = self.crawler.parts.detach
        if detach is not None:
            detach.detach()
            self.exit(0)

    def action_to_list(self) -> None:
        """esc on a monitor opened from the dashboard: back to the list, the crawl goes on."""
        if self.from_list:
            self.action_detach()

    def action_pause(self) -> None:
        self.crawler.pause()
        self.refresh_now()

    def action_resume(self) -> None:
        self.crawler.resume()
        self.refresh_now()

    def _set_concurrency(self, n: int) -> None:
        n = max(1, min(MAX_CONCURRENCY, n))
        if n != self.crawler.concurrency:
            self.crawler.set_concurrency(n)
        self.refresh_now()

    def action_more(self, step: int = 1) -> None:
        self._set_concurrency(self.crawler.concurrency + step)

    def action_fewer(self, step: int = 1) -> None:
        self._set_concurrency(self.crawler.concurrency - step)

    def action_set_concurrency(self) -> None:
        def apply(n: int | None) -> None:
            if n is not None and self.live:
                self._set_concurrency(n)

        self.push_screen(ConcurrencyPrompt(self.crawler.concurrency), apply)

    def action_cancel_worker(self) -> None:
        worker_id = self.workers_table.selected_worker()
        if worker_id is None:
            self.notify("No worker selected", severity="warning", timeout=2)
            return
        if self.crawler.cancel_worker(worker_id):
            self.notify(f"Worker {worker_id} cancelled; its URL is back on the queue", timeout=3)
        else:
            self.notify(f"Worker {worker_id} is already gone", severity="warning", timeout=3)
        self.refresh_now()

    def _show_list(self, cls: type[ErrorListScreen] | type[MergeListScreen]) -> None:
        if isinstance(self.screen, cls):
            return
        snap = self.last_snapshot or self.refresh_now()
        screen = cls(snap, self.errors_panel.home)
        if isinstance(self.screen, EventListScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def action_errors(self) -> None:
        self._show_list(ErrorListScreen)

    def action_merges(self) -> None:
        self._show_list(MergeListScreen)

    def action_summary(self) -> None:
        if self._finished and not isinstance(self.screen, SummaryScreen):
            self.push_screen(self._summary_screen(self.last_snapshot or self.refresh_now()))

    def _show_traps(self) -> None:
        view = self.crawler_queue_view()
        parts = trap_parts(view.traps) if view is not None and self.live else []
        self.trap_warning.display = bool(parts)
        if parts:
            self.trap_warning.show(*parts)

    def help_keys(self) -> list[tuple[str, str]]:
        return help_lines(self)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_keys()))

    async def action_quit(self) -> None:
        if self.crawl_task is None or self.crawl_task.done():
            self.exit(self.exit_code)
            return
        if self._stopping:
            self.notify("Stopping: waiting for in-flight work and flushing records…", timeout=3)
            return
        if isinstance(self.screen, ConfirmQuit):
            self.screen.dismiss(True)  # asked twice (q q, ctrl+c ctrl+c): that is a yes
            return
        snap = self.last_snapshot or self.refresh_now()

        def answer(yes: bool | str | None) -> None:
            if yes == "detach":
                self.action_detach()
            elif yes:
                self.stop_crawl()

        self.push_screen(ConfirmQuit(snap.in_flight, snap.queued, can_detach=self.can_detach, shared=self.cluster),
                         answer)


async def run_tui_async(
    crawler: Monitor,
    *,
    exit_on_finish: bool = False,
    refresh_hz: float = 4.0,
    headless: bool = False,
    hangup: HangupPolicy | None = None,
) -> int:
    """Run the app on the current loop until the person quits; the crawl is always
    stopped and awaited (records flushed) before this returns. Returns the exit code:
    0 when the crawl finished or was stopped, 1 if the engine raised.
    `headless` (no terminal output) is for tests and benchmarks. If the terminal goes
    away, `hangup` decides: the crawl goes on without a screen until it ends, or stops."""
    app = CrawlApp(crawler, exit_on_finish=exit_on_finish, refresh_hz=refresh_hz, hangup=hangup)
    try:
        await app.run_async(headless=headless)
    finally:
        task = app.crawl_task
        if task is None and app.hung_up and hangup is not None and not hangup.stop:
            # the terminal went before the first frame: the crawl starts, detached
            await hangup.carry_on(crawler, asyncio.create_task(crawler.crawl(), name="crawltop-crawl"))
        elif task is None:  # the app closed before the crawl started: still close the sinks
            crawler.stop()
            with contextlib.suppress(BaseException):
                await crawler.crawl()
        elif not task.done() and app.hung_up and hangup is not None and not hangup.stop:
            await hangup.carry_on(crawler, task)
        elif not task.done():
            crawler.stop()
            with contextlib.suppress(BaseException):
                await task
    if app.return_code not in (None, 0):
        return app.return_code
    return app.exit_code


def run_tui(crawler: Monitor, *, exit_on_finish: bool = False, refresh_hz: float = 4.0,
            hangup: HangupPolicy | None = None) -> int:
    """Blocking entry point for the CLI: `sys.exit(run_tui(crawler, exit_on_finish=...))`."""
    return runloop.run(run_tui_async(crawler, exit_on_finish=exit_on_finish, refresh_hz=refresh_hz, hangup=hangup))
