"""The monitor's steering keys: the methods that open the steering screens and prompts
(tui/screens/steer.py, tui/screens/queues.py) and send what they answer to the crawl's
`Steer`, `Ignoring` or `Cluster` part (core/surface.py). Kept out of tui/app.py, which is
the screen and its refresh: these only act, on a key or from the steering screens.

Whether each key can run now is its row's `enabled` in tui/actions.py.
"""
from __future__ import annotations

from textual.app import App

from ..core.monitor.queueview import QueueView
from ..core.monitor.stats import Snapshot
from ..core.steering.ignores import IgnoreSetView, IgnoreView
from ..core.surface import Ignoring, Monitor, Steer
from . import fmt
from .panels.breakdown import BreakdownPanel
from .panels.failures import ErrorsPanel
from .panels.processes import ProcessesPanel
from .screens.queues import QueuesScreen
from .screens.steer import IgnoresScreen, QueueScreen, TextPrompt


class SteerActions(App[int]):
    """CrawlApp's steering actions; CrawlApp is the one subclass and gives what is declared here."""

    crawler: Monitor
    last_snapshot: Snapshot | None
    breakdown: BreakdownPanel
    errors_panel: ErrorsPanel
    processes_panel: ProcessesPanel | None

    @property
    def live(self) -> bool:
        raise NotImplementedError  # CrawlApp.live

    def refresh_now(self) -> Snapshot:
        raise NotImplementedError  # CrawlApp.refresh_now

    def _cannot_steer(self) -> None:
        self.notify("This crawl cannot be steered from here (no engine in this process)",
                    severity="warning", timeout=3)

    def _steer(self) -> Steer | None:
        """The crawl's steering part, or None (and the person is told)."""
        steer = self.crawler.parts.steer
        if steer is None:
            self._cannot_steer()
        return steer

    def _ignoring(self) -> Ignoring | None:
        ignoring = self.crawler.parts.ignoring
        if ignoring is None:
            self._cannot_steer()
        return ignoring

    def crawler_ignores(self) -> tuple[IgnoreView, ...]:
        steer = self.crawler.parts.steer
        return tuple(steer.ignores()) if steer is not None else ()

    def crawler_ignore_sets(self) -> tuple[IgnoreSetView, ...]:
        steer = self.crawler.parts.steer
        return tuple(steer.ignore_sets()) if steer is not None else ()

    def action_ignore_set(self, value: str = "") -> None:
        """The ignores screen's `s`: a curated set's name; on if it is off, off if it is on."""
        steer = self.crawler.parts.steer
        if steer is None:
            self.notify("Ignore sets are an engine's: not available here", severity="warning", timeout=3)
            return
        names = [s.name for s in steer.ignore_sets()]

        async def apply(name: str) -> str | None:
            on = name.strip() not in {s.name for s in steer.ignore_sets() if s.on}
            result = await steer.set_ignore_set(name.strip(), on)
            if not result.ok:
                return result.error
            self.notify(f"Ignore set {name.strip()} on: {fmt.count(result.dropped)} queued URLs dropped" if on
                        else f"Ignore set {name.strip()} off", timeout=4, markup=False)
            self.refresh_now()
            if isinstance(self.screen, IgnoresScreen):
                self.screen.show()
            return None

        self.push_screen(TextPrompt(f"Turn an ignore set on or off ({', '.join(names)}):", value=value,
                                    placeholder="blogs", apply=apply, id="ignore-set-prompt"))

    def crawler_queue_view(self) -> QueueView | None:
        steer = self.crawler.parts.steer
        return steer.queue_view() if steer is not None else None

    def action_ignore(self, value: str = "") -> None:
        ignoring = self._ignoring()
        if ignoring is None:
            return

        async def apply(pattern: str) -> str | None:
            result = await ignoring.add_ignore(pattern)
            if not result.ok:
                return result.error
            self.notify(f"Ignoring {pattern}: {fmt.count(result.dropped)} queued URLs dropped",
                        timeout=4, markup=False)
            self.refresh_now()
            return None

        self.push_screen(TextPrompt("Ignore URLs matching (RE2 regex, searched in the full URL):", value=value,
                                    placeholder=r"^https?://example\.com/calendar/", apply=apply,
                                    id="ignore-prompt"))

    def remove_ignore(self, pattern: str) -> None:
        ignoring = self._ignoring()
        if ignoring is not None and ignoring.remove_ignore(pattern):
            self.notify(f"Ignore removed: {pattern}; later links are admitted again", timeout=3, markup=False)

    def action_ignores(self) -> None:
        if not isinstance(self.screen, IgnoresScreen):
            self.push_screen(IgnoresScreen(id="ignores"))

    def action_queue(self) -> None:
        if not isinstance(self.screen, QueueScreen):
            self.push_screen(QueueScreen(self.errors_panel.home))

    def action_queues(self) -> None:
        if not isinstance(self.screen, QueuesScreen):
            self.push_screen(QueuesScreen())

    def action_add_seed(self) -> None:
        steer = self._steer()
        if steer is None:
            return

        def apply(url: str) -> str | None:
            result = steer.add_seed(url)
            if not result.ok:
                return result.error
            self.notify(f"Added {result.url}", timeout=3, markup=False)
            self.refresh_now()
            return None

        self.push_screen(TextPrompt("Add a URL to the crawl (its host joins the scope):",
                                    placeholder="https://example.com/", apply=apply, id="seed-prompt"))

    def _selected_host(self) -> str | None:
        host = self.breakdown.hosts.selected_key()
        if host is None:
            self.notify("No host selected", severity="warning", timeout=2)
        return host

    def action_toggle_host(self) -> None:
        host = self._selected_host()
        if host is not None:
            self.toggle_host(host)

    def toggle_host(self, host: str) -> None:
        """Pause or resume one host (the hosts panel's and the queues view's `h`)."""
        steer = self._steer()
        if steer is None:
            return
        if host in steer.paused_hosts():
            n = steer.resume_host(host)
            self.notify(f"Host {host} resumed; {n} URLs back on the queue", timeout=3, markup=False)
        else:
            steer.pause_host(host)
            self.notify(f"Host {host} paused: its URLs wait, others go on", timeout=3, markup=False)
        self.refresh_now()

    def action_host_delay(self) -> None:
        host = self._selected_host()
        if host is not None:
            current = next((h.delay for h in (self.last_snapshot.hosts if self.last_snapshot else ())
                            if h.host == host), 0.0)
            self.ask_host_delay(host, current)

    def ask_host_delay(self, host: str, current: float) -> None:
        """The delay prompt for one host (the hosts panel's and the queues view's `t`)."""
        steer = self._steer()
        if steer is None:
            return

        def apply(text: str) -> str | None:
            try:
                steer.set_host_delay(host, float(text))
            except ValueError as exc:
                return str(exc) if "delay" in str(exc) else f"not a number of seconds: {text}"
            self.refresh_now()
            return None

        self.push_screen(TextPrompt(f"Delay between fetches from {host}, in seconds:", value=f"{current:g}",
                                    apply=apply, id="delay-prompt"))

    def action_process(self, op: str) -> None:
        panel = self.processes_panel
        proc = panel.table.selected_key() if panel is not None else None
        cluster = self.crawler.parts.cluster
        if proc is None or cluster is None:
            self.notify("No process selected", severity="warning", timeout=2)
            return
        send = {"pause": cluster.pause_process, "resume": cluster.resume_process, "stop": cluster.stop_process}
        send[op](proc)
        self.notify(f"{op.capitalize()} sent to {proc}", timeout=3, markup=False)
