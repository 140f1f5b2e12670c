"""Recent redirect merges, `from -> target` (the target had already been seen)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from core.stats import MergeEvent, Snapshot
from tui import fmt
from tui.line import Line
from tui.logtable import LogTable
from tui.table import Cell, Col, cell


def merge_cells(m: MergeEvent, home: frozenset[str] = frozenset()) -> tuple[Cell, ...]:
    return (
        cell(fmt.display_url(m.source, home)),
        cell("→", "dim"),
        cell(fmt.display_url(m.target, home), "cyan"),
    )


class MergesTable(LogTable):
    COLUMNS = (
        Col("source", "from", None, 8),
        Col("arrow", "", 1),
        Col("target", "target", None, 8),
    )


class MergesPanel(Vertical):
    home: frozenset[str] = frozenset()  # the roots' hosts: their URLs show by path
    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = MergesTable(id="merges-table")
        yield self.heading
        yield self.table

    def show(self, snap: Snapshot) -> None:
        self.heading.show(
            ("Merges ", "bold"), (fmt.count(snap.merges), "bold"),
            ("  redirects ", "dim"), fmt.count(snap.redirects),
        )
        table = self.table
        new = [(str(m.seq), merge_cells(m, self.home)) for m in snap.recent_merges if m.seq > table.last_seq]
        if new:
            table.last_seq = snap.recent_merges[-1].seq
        # every frame, so rows held back by the table's interval get in; at once when the
        # crawl is not running at speed
        table.append(new, now=snap.state != "RUNNING")
