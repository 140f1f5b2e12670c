"""A crawl's summary: the few numbers the dashboard (`crawltop` alone) shows per crawl.

A full snapshot is O(workers + hosts shown) and carries rings of events; a dashboard
watching fifty crawls twice a second must not ask for fifty of those per frame.
A summary is O(1): counters, the outcome counts (core/outcomes.py, the words every surface
uses), host counts by state (cached by the engine, O(hosts) at most once a second) and the
last SPARK seconds of pages/s for the row's sparkline. The same fields are written to the
run directory when a crawl ends (core/sockets/ended.py), so a dashboard that was not
watching still shows how it ended.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..outcomes import FAILED, OUTCOMES

SPARK = 30  # seconds of pages/s history in a summary


@dataclass(frozen=True, slots=True)
class Summary:
    """One crawl's row. `state` is the run state (RUNNING, PAUSED, STOPPING, DONE)."""

    state: str
    elapsed: float
    pages: int
    records: int
    queued: int
    seen: int
    rate_now: float
    rate_avg: float
    concurrency: int
    requisites: int = 0
    externals: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    fetched_classes: dict[str, int] = field(default_factory=dict)
    host_counts: dict[str, int] = field(default_factory=dict)  # hosts by state (core/queueing/hosts.py STATES)
    spark: tuple[int, ...] = ()  # pages per second, oldest first, at most SPARK
    notice: str = ""
    # --browser: Chromium's memory (bytes), memory_limit and restarts (core/monitor/stats.py
    # BrowserView); empty for a crawl without it
    browser: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.outcomes.get(FAILED, 0)


FIELDS = tuple(f.name for f in dataclasses.fields(Summary))


def of_snapshot(snap: Any) -> Summary:
    """A summary from a full snapshot (a monitor that holds one: core/sockets/client.py HeldStats)."""
    return Summary(state=snap.state, elapsed=snap.elapsed, pages=snap.pages, records=snap.records,
                   queued=snap.queued, seen=snap.seen, rate_now=snap.rate_now, rate_avg=snap.rate_avg,
                   concurrency=snap.concurrency, requisites=snap.requisites, externals=snap.externals,
                   outcomes=dict(snap.outcomes), fetched_classes=dict(snap.fetched_classes),
                   host_counts=dict(snap.host_counts), spark=tuple(snap.history_pages[-SPARK:]),
                   notice=snap.notice, browser=browser_numbers(snap.browser))


def browser_numbers(view: Any) -> dict[str, int]:
    """A BrowserView's numbers as a summary carries them ({} without --browser)."""
    if view is None:
        return {}
    return {"memory": view.memory, "memory_limit": view.memory_limit, "restarts": view.restarts}


def to_wire(summary: Summary) -> dict[str, Any]:
    """JSON-ready: floats to the millisecond, as snapshots travel. (By hand: dataclasses.asdict
    deep-copies, 4x the cost of the whole request; the dicts here are the summary's own copies.)"""
    out: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(summary, name)
        if isinstance(value, float):
            value = round(value, 3)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


_INTS = frozenset(("pages", "records", "queued", "seen", "concurrency", "requisites", "externals"))
_FLOATS = frozenset(("elapsed", "rate_now", "rate_avg"))
_COUNTS = frozenset(("outcomes", "fetched_classes", "host_counts", "browser"))
_LIMIT = 1e15  # no counter or duration of a real crawl comes near: anything past it is not a summary


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -_LIMIT < value < _LIMIT:
        raise ValueError("not a number in range")  # (NaN fails the comparison too)
    return kind(value)


def from_wire(data: dict[str, Any]) -> Summary:
    """A Summary from its wire form; unknown fields are left out, missing ones keep their
    defaults (an engine a version apart still shows its row). KeyError if the required ones
    are missing; ValueError if a field is not of its type (a hand-edited or foreign `.ended`
    file, a damaged Redis row): every field is checked, so a row that is shown can be drawn."""
    if not isinstance(data, dict):
        raise ValueError("a summary is a JSON object")
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        if k in _INTS:
            kwargs[k] = _number(v, int)
        elif k in _FLOATS:
            kwargs[k] = _number(v, float)
        elif k in _COUNTS:
            if not isinstance(v, dict):
                raise ValueError(f"{k}: not an object")
            kwargs[k] = {str(n): _number(c, int) for n, c in v.items()}
        elif k == "spark":
            if not isinstance(v, list | tuple):
                raise ValueError("spark: not a list")
            kwargs[k] = tuple(_number(c, int) for c in v[-SPARK:])
        elif k in ("state", "notice"):
            if not isinstance(v, str):
                raise ValueError(f"{k}: not a string")
            kwargs[k] = v
    return Summary(**kwargs)
