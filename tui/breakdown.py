"""Breakdowns: status codes, and the top hosts (in flight, done, errors, latency)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from ..core.stats import Snapshot
from . import fmt
from .table import Col, DiffTable, cell


def status_style(code: int) -> str:
    if 200 <= code < 300:
        return "bold $success"
    if 300 <= code < 400:
        return "bold $accent"
    if 400 <= code < 500:
        return "bold $warning"
    return "bold $error"


def status_parts(statuses: dict[int, int]) -> list:
    parts: list = []
    for code in sorted(statuses):
        if parts:
            parts.append("  ")
        parts += [(str(code), status_style(code)), " ", fmt.compact(statuses[code])]
    return parts or [("no responses yet", "dim")]


def _host_label(h) -> str:
    """The host, marked when paused (with its parked URLs) or given its own delay."""
    label = h.host
    if getattr(h, "paused", False):
        label = f"⏸{getattr(h, 'parked', 0)} {label}"
    if h.delay:
        label += f" ⏱{h.delay:g}s"
    return label


class HostsTable(DiffTable):
    COLUMNS = (
        Col("host", "host", None, 10),
        Col("flight", "fl", 3, justify="right", min_table=40),
        Col("done", "done", 5, justify="right"),
        Col("errors", "err", 5, justify="right", min_table=40),
        Col("avg", "avg", 6, justify="right"),
    )

    def show(self, snap: Snapshot) -> None:
        self.sync(
            (
                h.host,
                (
                    cell(_host_label(h), "bold $warning" if getattr(h, "paused", False) else ""),
                    cell(h.in_flight or "", "bold"),
                    cell(fmt.compact(h.done)),
                    cell(fmt.compact(h.errors) if h.errors else "", "red"),
                    cell(fmt.millis(h.avg_ms) if h.done else ""),
                ),
            )
            for h in snap.hosts
        )


class BreakdownPanel(Vertical):
    """The top hosts (the status codes sit under the sparklines)."""

    def compose(self) -> ComposeResult:
        self.hosts = HostsTable(id="hosts-table")
        yield self.hosts

    def show(self, snap: Snapshot) -> None:
        self.hosts.show(snap)
