"""What stays on screen when the crawl is done: totals, rates and the top errors."""
from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static

from ...core.monitor.sanitize import clean
from ...core.monitor.stats import Snapshot
from ...core.outcomes import outcome_line
from .. import fmt
from .breakdown import status_parts
from .keybar import KeyBar


def summary_content(snap: Snapshot, top_errors: Sequence[tuple[str, int]], *, failure: str | None = None) -> Content:
    """The whole summary as one Content; untrusted text enters only as plain strings."""
    label = "dim"
    p: list = [
        (" DONE ", "bold reverse $primary"), "  ", ("crawl finished in ", label), (fmt.duration(snap.elapsed), "bold"),
        (" at ", label), (fmt.rate(snap.rate_avg), "bold"), (" on average", label), "\n\n",
    ]
    if failure:
        p += [("The crawl stopped with an error: ", "bold $error"), clean(failure, 300), "\n\n"]
    left = [
        ("records", fmt.count(snap.records)),
        ("pages fetched", fmt.count(snap.pages)),
        ("bytes", fmt.human_bytes(snap.bytes)),
        ("URLs seen", fmt.count(snap.seen)),
        ("left in queue", fmt.count(snap.queued)),
        ("truncated bodies", fmt.count(snap.truncated)),
    ]
    right = [
        ("errors", fmt.count(snap.errors)),
        ("retries", fmt.count(snap.retries)),
        ("redirects", fmt.count(snap.redirects)),
        ("redirect merges", fmt.count(snap.merges)),
        ("robots.txt blocked", fmt.count(snap.robots_blocked)),
        ("carried over (resumed)", fmt.count(snap.resumed_from)) if snap.resumed_from else ("", ""),
    ]
    if snap.requisites or snap.externals:  # beside the pages: what else the crawl spent requests on
        left.append(("requisites", fmt.count(snap.requisites)))
        right.append(("external checked", fmt.count(snap.externals)))
    if snap.sitemap_probes:  # guessed /sitemap.xml probes leave no record: this is their trace
        left.append(("sitemap probes", fmt.count(snap.sitemap_probes)))
        right.append(("found by probes", fmt.count(snap.sitemap_found)))
    retired = snap.host_counts.get("retired", 0)
    if retired or snap.hosts_over_budget:  # hosts given up on, URLs a budget turned away
        left.append(("hosts retired", fmt.count(retired)))
        right.append(("over host budget", fmt.count(snap.hosts_over_budget)))
    for (ln, lv), (rn, rv) in zip(left, right, strict=True):  # appended in pairs
        p += [(f"  {ln:<17}", label), (f"{lv:>9}", "bold"), "     "]
        if rn:
            p += [(f"{rn:<19}", label), (f"{rv:>9}", "bold")]
        p.append("\n")
    p += ["\n", ("Outcomes  ", "bold"), outcome_line(snap.outcomes, snap.fetched_classes), "\n"]
    p += [("Statuses  ", "bold"), *status_parts(snap.statuses), "\n"]
    if snap.errors_by_kind:
        p += [("Errors    ", "bold")]
        for n, (kind, count) in enumerate(sorted(snap.errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0]))):
            p += [("  " if n else ""), clean(kind, 80), " ", (fmt.count(count), "bold $error")]
        p.append("\n")
    if top_errors:
        p += ["\n", ("Top error URLs\n", "bold")]
        for url, n in top_errors:
            p += [(f"  {fmt.count(n):>6}  ", "bold"), clean(url, 300), "\n"]
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
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#summary-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
