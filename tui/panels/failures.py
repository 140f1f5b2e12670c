"""Recent errors: a count per kind, and rows of kind, tries and URL."""
from __future__ import annotations

from ...core.monitor.stats import ErrorEvent, Snapshot
from .. import fmt
from ..widgets.logtable import LogPanel, LogTable
from ..widgets.table import Cell, Col, cell


def kind_parts(errors_by_kind: dict[str, int], total: int) -> list:
    parts: list = [("Errors ", "bold"), (fmt.count(total), "bold $error" if total else "bold")]
    for kind, n in sorted(errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        parts += [("  ", ""), (fmt.safe(fmt.short_kind(kind)).plain, "dim"), " ", (fmt.count(n), "bold")]
    return parts


def error_cells(e: ErrorEvent, home: frozenset[str] = frozenset()) -> tuple[Cell, ...]:
    return (
        cell(fmt.short_kind(e.kind), "red"),
        cell(f"×{e.tries}" if e.tries else "", "yellow" if e.tries > 1 else "dim"),
        cell(fmt.display_url(e.url, home)),
    )


class ErrorsTable(LogTable):
    COLUMNS = (
        Col("kind", "reason", 18),
        Col("tries", "try", 3),
        Col("url", "url", None, 10, cut="middle"),
    )


class ErrorsPanel(LogPanel):
    TABLE = ErrorsTable
    TABLE_ID = "errors-table"

    def events(self, snap: Snapshot) -> tuple[ErrorEvent, ...]:
        return snap.recent_errors

    def cells(self, event: ErrorEvent) -> tuple[Cell, ...]:
        return error_cells(event, self.home)

    def heading_parts(self, snap: Snapshot) -> list:
        return kind_parts(snap.errors_by_kind, snap.errors)
