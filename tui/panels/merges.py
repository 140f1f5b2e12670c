"""Recent redirect merges, `from -> target` (the target had already been seen)."""
from __future__ import annotations

from ...core.monitor.stats import MergeEvent, Snapshot
from .. import fmt
from ..widgets.logtable import LogPanel, LogTable
from ..widgets.table import Cell, Col, cell


def merge_cells(m: MergeEvent, home: frozenset[str] = frozenset()) -> tuple[Cell, ...]:
    return (
        cell(fmt.display_url(m.source, home)),
        cell("→", "dim"),
        cell(fmt.display_url(m.target, home), "cyan"),
    )


class MergesTable(LogTable):
    COLUMNS = (
        Col("source", "from", None, 8, cut="middle"),
        Col("arrow", "", 1),
        Col("target", "target", None, 8, cut="middle"),
    )


class MergesPanel(LogPanel):
    TABLE = MergesTable
    TABLE_ID = "merges-table"

    def events(self, snap: Snapshot) -> tuple[MergeEvent, ...]:
        return snap.recent_merges

    def cells(self, event: MergeEvent) -> tuple[Cell, ...]:
        return merge_cells(event, self.home)

    def heading_parts(self, snap: Snapshot) -> list:
        return [("Merges ", "bold"), (fmt.count(snap.merges), "bold"),
                ("  redirects ", "dim"), fmt.count(snap.redirects)]
