"""The processes panel of a shared crawl: one row per engine process, lost ones in red
with their leases counting down. Shown only when the crawl has a `Cluster` part
(core/surface.py; core/cluster/view.py); `P`, `R` and `K` pause, resume and stop the selected process.
With --browser each engine runs its own Chromium: a column says its memory and restarts (the
crawl's sum is on the Workers panel's title), shown only for such a crawl.
On a Redis Cluster, the nodes under it follow: each master's keys and memory, the one
serving this crawl's slot marked, one that does not answer in red (core/cluster/nodes.py)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from ...core.cluster.nodes import NodeRow
from ...core.cluster.procs import ProcessRow
from ...core.monitor import browsertext
from .. import fmt
from ..widgets.line import Line
from ..widgets.table import Cell, Col, DiffTable, cell

STATE_STYLE = {"RUNNING": "green", "PAUSED": "yellow", "STOPPING": "magenta", "DONE": "dim"}


def process_cells(row: ProcessRow) -> tuple[Cell, ...]:
    info = row.info
    if row.lost:
        state = cell("LOST", "bold reverse red")
        leases = cell(f"{row.leases} back in {max(0.0, row.lease_left or 0.0):.0f}s" if row.leases else "0", "bold red")
    else:
        state = cell(info.state, STATE_STYLE.get(info.state, "bold"))
        leases = cell(row.leases)
    return (
        cell(info.host),
        cell(info.pid),
        state,
        cell(f"{info.busy}/{info.workers}"),
        cell(fmt.rate(info.rate)),
        cell(fmt.count(info.pages)),
        cell(f"{row.beat_age:.1f}s ago", "bold red" if row.lost else "dim"),
        leases,
    )


def chromium_cell(row: ProcessRow) -> Cell:
    """'393M r2', as `crawltop ls` has it; '-' for an engine without a browser (or lost: its
    numbers are as old as its last heartbeat)."""
    b = row.info.browser
    if not b or row.lost:
        return cell("-", "dim")
    try:
        return cell(browsertext.cell(float(b["memory"]), int(b["restarts"])))
    except (KeyError, TypeError, ValueError, OverflowError):  # a foreign or damaged row
        return cell("-", "dim")


class ProcessesTable(DiffTable):
    COLUMNS = (
        Col("host", "host", None, 10),
        Col("pid", "pid", 6, justify="right"),
        Col("state", "state", 8),
        Col("workers", "busy/w", 6, justify="right"),
        Col("rate", "pages/s", 8, justify="right"),
        Col("pages", "pages", 8, justify="right", min_table=100),
        Col("beat", "heartbeat", 9, justify="right"),
        Col("leases", "leases", 13),
    )

    BROWSER = (Col("chromium", "chromium", 9, justify="right"),)

    def show(self, rows: list[ProcessRow]) -> None:
        browsers = any(row.info.browser for row in rows)
        if browsers:  # a --browser crawl: its engines' Chromiums (once seen, the column stays)
            self.set_columns(ProcessesTable.COLUMNS + self.BROWSER)
        if len(self.COLUMNS) > len(ProcessesTable.COLUMNS):
            self.sync((row.proc, (*process_cells(row), chromium_cell(row))) for row in rows)
        else:
            self.sync((row.proc, process_cells(row)) for row in rows)


def node_cells(row: NodeRow) -> tuple[Cell, ...]:
    mine = ("this crawl" if row.parts == 1 else f"{row.crawl} partition{'s' if row.crawl != 1 else ''}"
            ) if row.crawl else ""
    if not row.up:
        state = cell("DOWN" + (f": {mine} wait" + ("s" if row.parts == 1 or row.crawl == 1 else "") if mine else ""),
                     "bold reverse red")
    else:
        state = cell("up" + (f", {mine}" if mine else ""), "green" if row.crawl else "dim")
    return (
        cell(row.address, "bold" if row.crawl else ""),
        state,
        cell("-" if row.keys is None else fmt.count(row.keys)),
        cell("-" if row.memory is None else fmt.human_bytes(row.memory)),
    )


class NodesTable(DiffTable):
    COLUMNS = (
        Col("node", "master", 22),
        Col("state", "state", 20),
        Col("keys", "keys", 10, justify="right"),
        Col("memory", "memory", 10, justify="right"),
    )

    def show(self, rows: list[NodeRow]) -> None:
        self.sync((row.address, node_cells(row)) for row in rows)


class ProcessesPanel(Vertical):
    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = ProcessesTable(id="processes-table")
        self.nodes_heading = Line(classes="panel-title", id="nodes-title")
        self.nodes = NodesTable(id="nodes-table")
        self.nodes_heading.display = self.nodes.display = False
        yield self.heading
        yield self.table
        yield self.nodes_heading
        yield self.nodes

    def show(self, rows: list[ProcessRow], nodes: list[NodeRow] | None = None) -> None:
        self.table.show(rows)
        nodes = nodes or []
        self.nodes_heading.display = self.nodes.display = bool(nodes)
        if nodes:
            self.nodes.show(nodes)
            down = sum(1 for n in nodes if not n.up)
            parts_n: list = [("Redis Cluster ", "bold"), (str(len(nodes)), "bold"), (" masters", "dim")]
            if down:
                parts_n += ["  ", (f"{down} down", "bold reverse $error")]
            self.nodes_heading.show(*parts_n)
            self.nodes.styles.height = len(nodes) + 1
        lost = sum(1 for r in rows if r.lost)
        parts: list = [("Processes ", "bold"), (str(len(rows) - lost), "bold"), (" live", "dim")]
        if lost:
            parts += ["  ", (f"{lost} lost", "bold reverse $error")]
        parts += [("   P pause  R resume  K stop the selected one", "dim")]
        self.heading.show(*parts)
        self.table.styles.height = min(len(rows), 6) + 1 if nodes else "1fr"
        self.styles.height = min(len(rows), 6) + 2 + (len(nodes) + 2 if nodes else 0)
