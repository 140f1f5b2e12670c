"""One row per worker: id, phase, host, URL and time in phase; stuck workers stand out.
With --browser a page's tab phases show too, and after its URL the tab's requests in flight
and the bytes it was served so far."""
from __future__ import annotations

import statistics
from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical

from ...core.monitor.stats import BROWSER_PHASES, Snapshot, WorkerView
from .. import fmt
from ..widgets.line import Line
from ..widgets.table import Cell, Col, DiffTable, cell

ACTIVE = ("robots", "sitemap", "pool", "connecting", "sending", "headers", "reading", "parsing",
          *BROWSER_PHASES)
STUCK_FACTOR = 5.0
STUCK_MIN_SECONDS = 5.0

PHASE_STYLE = {
    "waiting": "dim",
    "paused": "yellow",
    "robots": "cyan",
    "sitemap": "cyan",
    "pool": "yellow",
    "connecting": "cyan",
    "sending": "cyan",
    "headers": "cyan",
    "reading": "green",
    "parsing": "blue",
    "backoff": "magenta",
    "navigating": "cyan",
    "loading": "green",
    "network idle": "green",
    "scrolling": "green",
    "reading links": "blue",
}
# within the phase column's 11 cells
PHASE_LABEL = {"backoff": "backing off", "pool": "wait conn", "headers": "wait reply", "network idle": "net idle",
               "reading links": "links"}


def stuck_workers(workers: Sequence[WorkerView], host_avg_ms: dict[str, float] | None = None) -> set[int]:
    """Workers busy far longer than the rest: > 5 s and > 5x the typical time.

    "Typical" is the median time-in-phase of the *other* busy workers; when a worker is
    the only one busy, the average latency of its host stands in.
    """
    busy = [w for w in workers if w.phase in ACTIVE]
    out: set[int] = set()
    if not busy:
        return out
    times = sorted(w.in_phase for w in busy)
    for w in busy:
        if w.in_phase <= STUCK_MIN_SECONDS:
            continue
        others = list(times)
        others.remove(w.in_phase)
        if others:
            typical = statistics.median(others)
        else:
            typical = (host_avg_ms or {}).get(w.host or "", 0.0) / 1000.0
        if w.in_phase > STUCK_FACTOR * typical:
            out.add(w.id)
    return out


class WorkersTable(DiffTable):
    COLUMNS = (
        Col("id", "id", 4),
        Col("phase", "phase", 11),
        Col("host", "host", 16, min_table=60),
        Col("url", "url", None, 10, cut="middle"),
        Col("tries", "try", 3, min_table=90),
        Col("time", "time", 7),
    )
    stuck: frozenset[int] | set[int] = frozenset()

    def rows_for(self, snap: Snapshot) -> list[tuple[str, tuple[Cell, ...]]]:
        # a check waiting out --timeout on a dead host is doing its job: only page workers get stuck
        stuck = stuck_workers([w for w in snap.workers if not w.check], {h.host: h.avg_ms for h in snap.hosts})
        self.stuck = stuck
        rows: list[tuple[str, tuple[Cell, ...]]] = []
        for w in sorted(snap.workers, key=lambda w: (w.check, w.id)):  # the page workers first, then checks
            is_stuck = w.id in stuck
            dim = "dim" if w.retiring or w.check else ""
            phase = PHASE_LABEL.get(w.phase, w.phase) + (" ↓" if w.retiring else "")
            rows.append(
                (
                    str(w.id),
                    (
                        cell(f"c{w.id}" if w.check else w.id, "bold red" if is_stuck else dim),
                        cell(phase, "bold red" if is_stuck else PHASE_STYLE.get(w.phase, "")),
                        cell(w.host or "", dim),
                        cell(_url_text(w), dim),
                        cell(w.tries or "", "yellow" if w.tries > 1 else dim),
                        cell(fmt.seconds(w.in_phase), "bold red reverse" if is_stuck else dim),
                    ),
                )
            )
        return rows

    def show(self, snap: Snapshot) -> None:
        self.sync(self.rows_for(snap))

    def selected_worker(self) -> int | None:
        key = self.selected_key()
        return int(key) if key is not None else None


def _url_text(w: WorkerView) -> str:
    """The URL's path, and a page's tab: '/p/3  4 req 120.5 KB' (the URL column cuts in its
    middle, so the tab's numbers stay in view at 80 columns)."""
    path = fmt.url_path(w.url) if w.url else ""
    if w.tab_requests is None:
        return path
    return f"{path}  {w.tab_requests} req {fmt.human_bytes(w.tab_bytes)}"


class WorkersPanel(Vertical):
    def compose(self) -> ComposeResult:
        self.heading = Line(classes="panel-title")
        self.table = WorkersTable(id="workers-table")
        yield self.heading
        yield self.table

    def show(self, snap: Snapshot) -> None:
        self.table.show(snap)
        retiring = sum(1 for w in snap.workers if w.retiring)
        parts: list = [("Workers ", "bold"), (str(snap.busy + snap.idle), "bold")]
        why = idle_reason(snap)
        if why:  # first: at 80 columns it is what this line must say
            parts += ["  ", (why, "bold $warning")]
        parts += [("  target ", "dim"), str(snap.concurrency), ("  busy ", "dim"), str(snap.busy),
                  ("  idle ", "dim"), str(snap.idle)]
        if retiring:
            parts += [("  retiring ", "dim"), str(retiring)]
        if snap.checks > 1:  # the check workers: listed below the page workers, as cN, while at work
            parts += [("  checks ", "dim"), f"{snap.checks_busy}/{snap.checks}"]
        parts += browser_parts(snap)
        if self.table.stuck:
            n = len(self.table.stuck)
            parts += ["  ", (f"{n} stuck", "bold reverse $error")]
        self.heading.show(*parts)


def browser_parts(snap: Snapshot) -> list:
    """--browser: Chromium's memory and its restarts, on the tabs' own title line (the status
    lines are full at 80 columns; this one has room)."""
    b = snap.browser
    if b is None:
        return []
    near = b.memory_limit and b.memory > 0.8 * b.memory_limit
    return [("  chromium ", "dim"), (fmt.human_bytes(b.memory) if b.memory else "-", "bold $warning" if near else ""),
            ("  restarts ", "dim"), str(b.restarts)]


def idle_reason(snap: Snapshot) -> str:
    """Why no worker fetches while URLs are queued: every host with work waits for its delay
    or backs off ('all 120 hosts waiting, next due in 0.3s'), or is paused. The engine
    hands out only due URLs, so idle page workers with due pages cannot happen (the check
    workers have a lane of their own)."""
    if snap.state != "RUNNING" or snap.busy or not snap.queued:
        return ""
    counts = snap.host_counts
    held = [(counts.get(s, 0), word) for s, word in (("waiting", "waiting"), ("backoff", "backing off"),
                                                     ("paused", "paused"))]
    held = [(n, word) for n, word in held if n]
    if not held:
        return ""
    if len(held) == 1:
        n, word = held[0]
        text = f"all {fmt.count(n)} hosts {word}" if n > 1 else f"1 host {word}"
    else:
        text = "no host due: " + ", ".join(f"{fmt.count(n)} {word}" for n, word in held)
    if snap.next_due is not None:
        text += f", next due in {fmt.seconds(snap.next_due)}"
    return text
