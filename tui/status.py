"""The two status lines: state, elapsed, counts, rates, bytes, errors, concurrency."""
from __future__ import annotations

from ..core.stats import Snapshot
from . import fmt
from .line import Line

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
        ("  queued ", label), (fmt.count(snap.queued), "bold"),
        ("  seen ", label), (fmt.count(snap.seen), "bold"),
        ("  ", label), (fmt.human_bytes(snap.bytes), "bold"),
    ]
    line2: list = [
        " ", (fmt.rate(snap.rate_now), "bold"), (" now  ", label),
        (fmt.rate(snap.rate_avg), "bold"), (" avg", label),
        ("  errors ", label), (fmt.count(snap.errors), "bold $error" if snap.errors else "bold"),
        ("  conc ", label), (str(snap.concurrency), "bold"),
        (" busy ", label), (str(snap.busy), "bold"),
        (" idle ", label), (str(snap.idle), "bold"),
        ("  retries ", label), (fmt.count(snap.retries), "bold"),
        ("  redirects ", label), (fmt.count(snap.redirects), "bold"),
    ]
    if snap.resumed_from:
        line2 += [("  resumed: ", label), (f"{fmt.count(snap.resumed_from)} carried over", "bold $accent")]
    return (*line1, "\n", *line2)


class StatusBar(Line):
    def show_snapshot(self, snap: Snapshot) -> None:
        self.show(*status_parts(snap))
