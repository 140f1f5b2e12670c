"""The end-of-crawl report: one text however the crawl ran.

`crawl` (headless or after the TUI), `resume`, `--processes N` and the last process out of a
`join`ed crawl end with the same report of the whole crawl, so that one site crawled any of
these ways reads the same (a resume that counted only its own run, or a Redis crawl reported
as a link check without time, rate or bytes, looked like a different crawl). Each variant
gathers `Totals` of the whole crawl from what it has, and `render()` writes them:

* one process: its Stats snapshot (`of_snapshot`);
* a resume: every record in the state file (`add`), so it counts what `crawltop report
  STATE` counts; the numbers records don't hold (time, retries, sitemap probes) are kept
  in the state file at the end of each run (`saved`), and this run's are its snapshot's;
* Redis: the crawl's records, each once (the record stream), plus the time, retries and
  sitemap probes of the processes' final snapshots (core/cluster/combine.py merges them).

URLs still queued at a stop are reported as `Left`: cancelled, or kept for a resume or a join.
"""
from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.outcomes import CANCELLED, FAILED, KIND_WORDS, REDIRECT_STATUSES, Tally, outcome_line, reason
from ..core.surface import Engine

TOP = 10  # failed URLs listed, by tries spent
# Run counters no record holds. (A record's `tries` do not give the retries: a stop spends
# the try of each URL in flight, which the next run fetches again; that is no retry.)
SAVED = ("elapsed", "retries", "sitemap_probes", "sitemap_found")
_SUMMED = ("records", "pages", "requisites", "externals", "bytes", "redirects", "merges", "robots_blocked",
           "ignored", "truncated", *SAVED)  # what two runs of one crawl add up


def number(n: float, decimals: int = 0) -> str:
    """Every count of the report as the screen writes it: 1174 -> '1,174'."""
    return f"{n:,.{decimals}f}"


@dataclass(slots=True)
class Totals:
    """What the report says of a crawl, whichever source it was counted from."""

    records: int = 0
    pages: int = 0
    requisites: int = 0
    externals: int = 0
    bytes: int = 0
    elapsed: float = 0.0
    retries: int = 0
    redirects: int = 0
    merges: int = 0
    robots_blocked: int = 0
    ignored: int = 0
    truncated: int = 0
    sitemap_probes: int = 0
    sitemap_found: int = 0
    hosts: int = 0
    hosts_retired: int = 0
    over_budget: int = 0
    tally: Tally = field(default_factory=Tally)  # outcomes, and the fetched ones by status class
    statuses: Counter[int] = field(default_factory=Counter)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)  # error_kind -> its latest reason in words
    top_errors: list[tuple[int, str]] = field(default_factory=list)  # (tries, url): a min-heap of TOP

    @property
    def errors(self) -> int:
        return self.tally.counts.get(FAILED, 0)

    def add(self, rec: Mapping[str, Any]) -> None:
        """One record, counted as core/crawler.py counts it into Stats when it is emitted."""
        status, kind, error = rec.get("status"), rec.get("error_kind"), rec.get("error")
        self.records += 1
        if status is not None:
            what = rec.get("kind") or "page"
            if what == "page":
                self.pages += 1
            elif what == "requisite":
                self.requisites += 1
            else:
                self.externals += 1
            self.bytes += int(rec.get("size") or 0)
            self.statuses[int(status)] += 1
            self.redirects += status in REDIRECT_STATUSES
        self.merges += bool(rec.get("merged"))
        self.truncated += bool(rec.get("truncated"))
        self.robots_blocked += kind == "robots"
        self.ignored += kind == "ignored"
        if self.tally.add(status, kind, error) == FAILED and error:
            kind = kind or "other"
            self.errors_by_kind[kind] += 1
            self.reasons[kind] = reason(kind, error)
            self._top(int(rec.get("tries") or 0), str(rec["url"]))

    def _top(self, tries: int, url: str) -> None:
        item = (max(1, tries), url)
        if len(self.top_errors) < TOP:
            heapq.heappush(self.top_errors, item)
        elif item > self.top_errors[0]:
            heapq.heapreplace(self.top_errors, item)

    @classmethod
    def of_records(cls, records: Iterable[Mapping[str, Any]]) -> Totals:
        totals = cls()
        for rec in records:
            totals.add(rec)
        return totals

    @classmethod
    def of_snapshot(cls, s: Snapshot, top: Sequence[tuple[str, int]] = ()) -> Totals:
        """One engine's own numbers (`top`: Stats.top_error_urls)."""
        tally = Tally()
        tally.counts.update(s.outcomes)
        tally.classes.update(s.fetched_classes)
        totals = cls(records=s.records, pages=s.pages, requisites=s.requisites, externals=s.externals, bytes=s.bytes,
                     retries=s.retries, redirects=s.redirects, merges=s.merges, robots_blocked=s.robots_blocked,
                     ignored=s.ignored, truncated=s.truncated, tally=tally, statuses=Counter(s.statuses),
                     errors_by_kind=Counter(s.errors_by_kind),
                     reasons={e.error_kind: e.kind for e in s.recent_errors if e.error_kind})
        for url, n in top:
            totals._top(n, url)
        return totals.with_run(s)

    def with_run(self, s: Snapshot) -> Totals:
        """The numbers only a running engine counts (no record holds them): time, retries,
        sitemap probes, hosts. `s` may be many processes' snapshots merged."""
        retired = s.host_counts.get("retired", 0)
        return dataclasses.replace(self, elapsed=s.elapsed, retries=s.retries, sitemap_probes=s.sitemap_probes,
                                   sitemap_found=s.sitemap_found, hosts=sum(s.host_counts.values()),
                                   hosts_retired=retired, over_budget=s.hosts_over_budget)

    def saved(self) -> dict[str, float]:
        """The run counters to keep in a state file, for the next resume's report."""
        return {name: getattr(self, name) for name in SAVED}

    def with_saved(self, saved: object) -> Totals:
        """Run counters kept by earlier runs (`saved`); anything else is ignored."""
        if not isinstance(saved, dict):
            return self
        out = dataclasses.replace(self)
        for name in SAVED:
            value = saved.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e15:
                setattr(out, name, float(value) if name == "elapsed" else int(value))
        return out

    def __add__(self, later: Totals) -> Totals:
        """Earlier runs and a later one: counts add up; hosts are the later run's (a resume
        restores every host, so its count is already the whole crawl's)."""
        tally = Tally()
        for t in (self, later):
            for mine, theirs in ((tally.counts, t.tally.counts), (tally.classes, t.tally.classes)):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + v
        summed = {name: getattr(self, name) + getattr(later, name) for name in _SUMMED}
        both = Totals(**summed, hosts=later.hosts, hosts_retired=later.hosts_retired, over_budget=later.over_budget,
                      tally=tally, statuses=self.statuses + later.statuses,
                      errors_by_kind=self.errors_by_kind + later.errors_by_kind,
                      reasons={**self.reasons, **later.reasons})
        for n, url in (*self.top_errors, *later.top_errors):
            both._top(n, url)
        return both


@dataclass(frozen=True, slots=True)
class Left:
    """URLs still queued when the crawl stopped: `kept` (a --state file or a Redis that
    stays, `hint` says how to go on) or cancelled. `recorded`: each already has its
    cancelled record (one process in memory), so the outcomes count them already."""

    n: int
    kept: bool
    hint: str = ""
    recorded: bool = False


def render(title: str, t: Totals, *, left: Left | None = None, notes: Sequence[str] = ()) -> str:
    """The report, every variant's: the same lines in the same order, every count as `number`
    writes it. `notes` go under the title (a resume's carried records, the Redis crawl)."""
    out: list[str] = [f"crawltop report: {clean(title, 2000)}"]
    w = out.append
    n = number
    out.extend(f"  {clean(note, 2000)}" for note in notes)
    rate = t.pages / t.elapsed if t.elapsed > 0 else 0.0
    w(f"  records {n(t.records)}  pages {n(t.pages)}  requisites {n(t.requisites)}  external {n(t.externals)}  "
      f"bytes {n(t.bytes)}  elapsed {n(t.elapsed, 1)}s  pages/s {n(rate, 1)}")
    outcomes = dict(t.tally.counts)
    if left is not None and not left.kept and not left.recorded:
        outcomes[CANCELLED] = outcomes.get(CANCELLED, 0) + left.n  # never fetched: the crawl stopped first
    w(f"  outcomes: {outcome_line(outcomes, t.tally.classes)}")
    if left is not None and left.n:
        w(f"  queued at the stop: {'kept' if left.kept else 'cancelled'} {n(left.n)}"
          + (f" ({clean(left.hint, 2000)})" if left.hint else ""))
    w(f"  redirects {n(t.redirects)}  merges {n(t.merges)}  retries {n(t.retries)}  "
      f"robots-blocked {n(t.robots_blocked)}  ignored {n(t.ignored)}  truncated {n(t.truncated)}")
    if t.sitemap_probes:  # guessed /sitemap.xml: no record unless found (core/fetching/sitemaps.py)
        w(f"  sitemap probes {n(t.sitemap_probes)} ({n(t.sitemap_found)} found)")
    w("  status codes:" + ("" if t.statuses else " none (no server answered)"))
    out.extend(f"    {code:>5}  {n(count)}" for code, count in sorted(t.statuses.items()))
    if t.hosts_retired or t.over_budget:
        w(f"  hosts {n(t.hosts)}: retired {n(t.hosts_retired)}  URLs over --max-pages-per-host {n(t.over_budget)}")
    w(f"  errors: {n(t.errors)}")  # the failed URLs (core/outcomes.py); skipped and cancelled are apart
    for kind, count in sorted(t.errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        words = t.reasons.get(kind, KIND_WORDS.get(kind, kind))
        w(f"    {n(count):>5}  {clean(kind, 40)}: {clean(words, 80)}")
    if t.top_errors:
        w("  top error URLs (by tries spent):")
        out.extend(f"    {n(tries):>5}  {clean(url, 2000)}"
                   for tries, url in sorted(t.top_errors, key=lambda e: (-e[0], e[1])))
    return "\n".join(out) + "\n"


def one_process(crawler: Engine, *, notes: Sequence[str] = ()) -> str:
    """The report of an engine's own run: a crawl in memory, or this process's part of a
    shared one. In memory a stop has already given each queued URL its cancelled record."""
    s = crawler.stats.snapshot()
    left = Left(s.cancelled, kept=False, recorded=True) if s.cancelled else None
    return render(roots_title(crawler.roots), Totals.of_snapshot(s, crawler.stats.top_error_urls(TOP)),
                  left=left, notes=notes)


def roots_title(roots: Sequence[str]) -> str:
    return ", ".join(roots)
