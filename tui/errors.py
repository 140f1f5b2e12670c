"""Recent errors: a count per kind, and rows of kind, tries and URL."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from core.stats import ErrorEvent, Snapshot
from tui import fmt
from tui.line import Line
from tui.logtable import LogTable
from tui.table import Cell, Col, cell


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
        Col("kind", "kind", 16),
        Col("tries", "try", 3),
        Col("url", "url", None, 10),
    )


class ErrorsPanel(Vertical):
    home: frozenset[str] = frozenset()  # the roots' hosts: their URLs show by path
    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = ErrorsTable(id="errors-table")
        yield self.heading
        yield self.table

    def show(self, snap: Snapshot) -> None:
        self.heading.show(*kind_parts(snap.errors_by_kind, snap.errors))
        table = self.table
        new = [(str(e.seq), error_cells(e, self.home)) for e in snap.recent_errors if e.seq > table.last_seq]
        if new:
            table.last_seq = snap.recent_errors[-1].seq
        # every frame, so rows held back by the table's interval get in; at once when the
        # crawl is not running at speed
        table.append(new, now=snap.state != "RUNNING")
