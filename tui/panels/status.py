"""The two status lines: state, elapsed, counts, rates, bytes, errors, concurrency."""
from __future__ import annotations

from ...core.monitor.hosttext import STATE_WORDS
from ...core.monitor.stats import Snapshot
from ...core.queueing.hosts import STATES
from .. import fmt
from ..widgets.line import Line

# States worth a line even for one host: the operator has to see these.
NOTABLE = ("backoff", "paused", "budget", "retired")
COUNT_STYLE = {"backoff": "bold $error", "retired": "bold $error", "paused": "bold $warning",
               "budget": "bold $warning", "fetching": "bold $success"}
SHORT_WORDS = {"fetching": "fetch", "waiting": "wait", "backoff": "backoff", "budget": "budget"}

STATE_STYLE = {
    "RUNNING": "bold $success",
    "PAUSED": "bold reverse $warning",
    "STOPPING": "bold reverse $error",
    "DONE": "bold reverse $primary",
}


def status_parts(snap: Snapshot) -> tuple:
    """The parts of both lines; pure, so tests can check them without a screen."""
    label = "dim"
    state = snap.state
    line1: list = [(f" {state} ", STATE_STYLE.get(state, "bold")), " ", (fmt.duration(snap.elapsed), "bold")]
    if state in ("PAUSED", "STOPPING"):
        line1 += ["  ", (f"{snap.in_flight} in flight", "bold $warning")]
    if snap.notice:
        line1 += ["  ", (f" {snap.notice} ", "bold reverse $error")]
    line1 += [
        ("  pages ", label), (fmt.count(snap.pages), "bold"),
        *_beside(snap, label),
        ("  queued ", label), (fmt.count(snap.queued), "bold"),
        ("  seen ", label), (fmt.count(snap.seen), "bold"),
        ("  ", label), (fmt.human_bytes(snap.bytes), "bold"),
    ]
    line2: list = [
        " ", (fmt.rate(snap.rate_now), "bold"), (" now  ", label),
        (fmt.rate(snap.rate_avg), "bold"), (" avg", label),
        ("  errors ", label), (fmt.count(snap.errors), "bold $error" if snap.errors else "bold"),
        *([("  skipped ", label), (fmt.count(snap.skipped), "bold")] if snap.skipped else []),
        *([("  cancelled ", label), (fmt.count(snap.cancelled), "bold $warning")] if snap.cancelled else []),
        ("  conc ", label), (str(snap.concurrency), "bold"),
        (" busy ", label), (str(snap.busy), "bold"),
        (" idle ", label), (str(snap.idle), "bold"),
        *([("  checks ", label), (f"{snap.checks_busy}/{snap.checks}", "bold")] if snap.checks > 1 else []),
        ("  retries ", label), (fmt.count(snap.retries), "bold"),
        ("  redirects ", label), (fmt.count(snap.redirects), "bold"),
    ]
    if snap.resumed_from:
        line2 += [("  resumed: ", label), (f"{fmt.count(snap.resumed_from)} carried over", "bold $accent")]
    return (*line1, "\n", *line2)


def _beside(snap: Snapshot, label: str) -> list:
    """Requisites fetched and external links checked, beside the pages, once there are any:
    what the crawl spends its requests on, at a glance."""
    parts: list = []
    if snap.requisites:
        parts += [(" req ", label), (fmt.count(snap.requisites), "bold")]
    if snap.externals:
        parts += [(" ext ", label), (fmt.count(snap.externals), "bold")]
    return parts


def hosts_parts(snap: Snapshot, width: int = 200, *, always: bool = False) -> list:
    """'hosts 1,000: 37 ready · 50 fetching · 880 waiting · 3 backing off · 30 retired';
    shorter words when that does not fit `width`. Empty for one host in a plain state
    unless `always` (the queues view's header: true for one host too), and for a store
    that keeps no host states."""
    counts = snap.host_counts
    total = sum(counts.values())
    if not total or (total == 1 and not always and not any(counts.get(s) for s in NOTABLE)):
        return []
    parts: list = []
    for words, sep in ((STATE_WORDS, " · "), (SHORT_WORDS, " · "), (SHORT_WORDS, "·")):
        parts = [(" hosts ", "dim"), (fmt.count(total), "bold"), (": ", "dim")]
        for state in STATES:
            n = counts.get(state)
            if n:
                if len(parts) > 3:
                    parts.append((sep, "dim"))
                parts += [(fmt.count(n), COUNT_STYLE.get(state, "bold")), " ", words.get(state, state)]
        if _length(parts) <= width:
            break
    over = snap.hosts_over_budget
    tail = [("  over budget: ", "dim"), (f"{fmt.count(over)} URLs", "$warning")] if over else []
    return parts + tail if _length(parts + tail) <= width else parts


def _length(parts: list) -> int:
    return sum(len(p if isinstance(p, str) else p[0]) for p in parts)


class StatusBar(Line):
    """Two lines, and a third counting hosts by state when the crawl has several (or one
    in a state to see) and the screen has room: the height changes only when that line
    comes or goes."""

    _last: Snapshot | None = None

    def on_resize(self) -> None:
        """The hosts line's words depend on the width: a first frame laid out before the
        bar knew its width is redone when it learns it."""
        if self._last is not None:
            self.show_snapshot(self._last)

    def show_snapshot(self, snap: Snapshot) -> None:
        self._last = snap
        # not on a tiny screen (under 18 lines): there the workers need every line
        hosts = hosts_parts(snap, self.size.width or 80) if self.app.size.height >= 18 else []
        height = 3 if hosts else 2
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height
        self.show(*status_parts(snap), *(("\n", *hosts) if hosts else ()))
