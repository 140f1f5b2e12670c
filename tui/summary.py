"""What stays on screen when the crawl is done: totals, rates and the top errors."""
from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from core.sanitize import clean
from core.stats import Snapshot
from tui import fmt
from tui.breakdown import status_parts


def summary_content(snap: Snapshot, top_errors: Sequence[tuple[str, int]], *, failure: str | None = None) -> Content:
    """The whole summary as one Content; untrusted text enters only as plain strings."""
    label = "dim"
    p: list = [(" DONE ", "bold reverse $primary"), "  ", ("crawl finished in ", label), (fmt.duration(snap.elapsed), "bold"), "\n\n"]
    if failure:
        p += [("The crawl stopped with an error: ", "bold $error"), clean(failure, 300), "\n\n"]
    rows = [
        ("records", fmt.count(snap.records)),
        ("pages fetched", fmt.count(snap.pages)),
        ("bytes", fmt.human_bytes(snap.bytes)),
        ("URLs seen", fmt.count(snap.seen)),
        ("left in queue", fmt.count(snap.queued)),
        ("average rate", fmt.rate(snap.rate_avg)),
        ("errors", fmt.count(snap.errors)),
        ("retries", fmt.count(snap.retries)),
        ("redirects", fmt.count(snap.redirects)),
        ("redirect merges", fmt.count(snap.merges)),
        ("robots.txt blocked", fmt.count(snap.robots_blocked)),
        ("truncated bodies", fmt.count(snap.truncated)),
    ]
    if snap.resumed_from:
        rows.append(("carried over (resumed)", fmt.count(snap.resumed_from)))
    for name, value in rows:
        p += [(f"  {name:<24}", label), (value, "bold"), "\n"]
    p += ["\n", ("Statuses  ", "bold"), *status_parts(snap.statuses), "\n"]
    if snap.errors_by_kind:
        p += ["\n", ("Errors by kind\n", "bold")]
        for kind, n in sorted(snap.errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
            p += [(f"  {fmt.count(n):>8}  ", "bold $error"), clean(kind, 80), "\n"]
    if top_errors:
        p += ["\n", ("Top error URLs\n", "bold")]
        for url, n in top_errors:
            p += [(f"  {fmt.count(n):>8}  ", "bold"), clean(url, 300), "\n"]
    p += ["\n", ("q quits · escape shows the last live view · e errors · r merges", label)]
    return Content.assemble(*p)


class SummaryScreen(Screen[None]):
    BINDINGS = [Binding("escape", "close", "Live view", id="summary-back")]

    def __init__(self, content: Content) -> None:
        super().__init__(id="summary")
        self._content = content

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="summary-scroll"):
            yield Static(self._content, id="summary-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#summary-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
