"""Breakdowns: status codes, and the top host queues (state, queued, done, errors, delay, latency)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from ...core.monitor.hosttext import delay_text, state_text
from ...core.monitor.stats import HostView, Snapshot
from .. import fmt
from ..widgets.table import Cell, Col, DiffTable, cell


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


def host_label(h: HostView, marks: bool = True) -> str:
    """The host, marked when paused (with its held-back URLs) or given a delay live
    (`marks`: the side panel, which has no room for state and source columns)."""
    label = h.host
    if not marks:
        return label
    if h.paused:
        label = f"⏸{h.parked} {label}"
    if h.delay and (h.source == "live" or not h.state):  # no state: a store that has no sources
        label += f" ⏱{h.delay:g}s"
    return label


STATE_STYLE = {
    "ready": "$success",
    "fetching": "bold $success",
    "waiting": "dim",
    "backoff": "bold $error",
    "paused": "bold $warning",
    "budget": "$warning",
    "retired": "bold reverse $error",
    "done": "dim",
}


def host_cells(h: HostView, *, short: bool) -> tuple[Cell, ...]:
    """One host queue's cells, in the columns' order of HostsTable (the side panel) and QueuesTable (`H`)."""
    return (
        cell(host_label(h, marks=short or not h.state), "bold $warning" if h.paused else ""),
        cell(state_text(h, short=short), STATE_STYLE.get(h.state, "")),
        cell(fmt.compact(h.queued) if h.queued else "", "bold" if h.queued else ""),
        cell(h.in_flight or "", "bold"),
        cell(fmt.compact(h.done)),
        cell(fmt.compact(h.errors) if h.errors else "", "red"),
        cell(delay_text(h), "dim" if h.source in ("", "delay") else ""),
        cell(h.source, "dim"),
        cell(fmt.millis(h.avg_ms) if h.done else ""),
        cell(fmt.compact(h.over) if h.over else "", "$warning"),
        cell(h.failures or "", "$error"),
    )


class HostsTable(DiffTable):
    """The side panel: the top hosts of the snapshot (TOP_HOSTS), as queues. Columns
    appear as the panel widens; the queues view (`H`) has every host and column."""

    COLUMNS = (
        Col("host", "host", None, 10),
        Col("state", "state", 9),
        Col("queued", "queue", 5, justify="right"),
        Col("flight", "fl", 2, justify="right", min_table=60),
        Col("done", "done", 5, justify="right", min_table=44),
        Col("errors", "err", 4, justify="right", min_table=48),
        Col("delay", "delay", 5, justify="right", min_table=60),
        Col("source", "src", 8, min_table=200),
        Col("avg", "avg", 5, justify="right", min_table=56),
        Col("over", "over", 5, justify="right", min_table=200),
        Col("failures", "fail", 4, justify="right", min_table=200),
    )
    # A store without host states (--redis): in flight, done, errors and latency, as before.
    PLAIN = (
        Col("host", "host", None, 10),
        Col("state", "state", 9, min_table=200),
        Col("queued", "queue", 5, min_table=200),
        Col("flight", "fl", 3, justify="right", min_table=40),
        Col("done", "done", 5, justify="right"),
        Col("errors", "err", 5, justify="right", min_table=40),
        Col("delay", "delay", 5, min_table=200),
        Col("source", "src", 8, min_table=200),
        Col("avg", "avg", 6, justify="right"),
        Col("over", "over", 5, min_table=200),
        Col("failures", "fail", 4, min_table=200),
    )

    def show(self, snap: Snapshot) -> None:
        if snap.hosts:
            self.set_columns(self.PLAIN if not any(h.state for h in snap.hosts) else type(self).COLUMNS)
        self.sync((h.host, host_cells(h, short=True)) for h in snap.hosts)


class BreakdownPanel(Vertical):
    """The top hosts (the status codes sit under the sparklines)."""

    def compose(self) -> ComposeResult:
        self.hosts = HostsTable(id="hosts-table")
        yield self.hosts

    def show(self, snap: Snapshot) -> None:
        self.hosts.show(snap)
