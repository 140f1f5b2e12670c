"""`crawltop report`: what a finished crawl's records say, as a link checker would.

The formats are in core/reporting/formats.py; the CLI (cli/commands/report.py) only parses
options and picks one. What counts as broken: `is_broken`.

Each broken thing is counted once: a fragment link into a page that is itself broken is
part of that page's finding (`Report.fragment_links`), not a missing id of its own; and a
host that never answered is one finding (`DeadHost`), not a line per URL and page.
"""
from __future__ import annotations

import heapq
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ReportError, StateError
from ..jsonfast import loads
from ..localfile import MB, lines
from ..outcomes import OFFLINE_AFTER, OFFLINE_SHARE, Tally, reason
from ..output.provenance import word
from ..storage.schema import SQLITE_MAGIC, iter_records, read_state

SLOWEST = 10
NOT_BROKEN_KINDS = frozenset({"cancelled", "ignored"})
KEEP_PAGES = 10  # pages listed per broken URL; the rest are counted (`more_pages`)
FRAGMENT = "#fragment"
# Failures that say the host itself was not reached (no HTTP status): core/fetching/attempt.py's
# HOST_KINDS, a timeout, and a host retired after such failures. A host whose every URL
# failed so is a `DeadHost`; one that answered any URL keeps its per-URL findings.
UNREACHED = frozenset(("dns", "connect", "tls", "timeout", "host-retired"))
_RETIRED_LAST = re.compile(r"\(last: ([a-z-]+)\)")  # core/crawler.py's HostRetired text: its last failure


@dataclass(frozen=True, slots=True)
class Options:
    min_status: int = 400
    include_robots: bool = False
    broken_only: bool = False


@dataclass(frozen=True, slots=True)
class Broken:
    url: str
    via: str | None
    status: int | None
    error_kind: str | None
    error: str | None
    discovery: str
    tag: str = "a"  # what on the page refers to it: a, img, srcset, css url(), script, ... or #fragment
    kind: str = "page"  # the broken URL's kind: page, requisite, external

    @property
    def reason(self) -> str:
        """What went wrong in words: the status, else the reason (core/outcomes.py reason)."""
        if self.tag == FRAGMENT:
            return "no id"
        if self.status is not None and self.error_kind is None:
            return str(self.status)
        return reason(self.error_kind, self.error)


@dataclass(frozen=True, slots=True)
class DeadHost:
    """A host that never answered: every URL of it failed before any HTTP status. Listed
    once, with the words of its first real failure (a retirement only repeats it), instead
    of a line per URL and referring page, which link rot multiplies."""

    host: str  # host[:port], as core/queueing/hosts.py keys it
    error_kind: str | None  # of its first failure that was not `host-retired`
    error: str | None
    kind: str  # its first failed URL's kind: page, requisite, external
    urls: int  # its URLs that failed
    pages: tuple[str, ...]  # the pages referring to them, most links first, KEEP_PAGES at most
    more_pages: int  # references from pages not listed

    @property
    def reason(self) -> str:
        return reason(self.error_kind, self.error)


@dataclass(frozen=True, slots=True)
class Hop:
    url: str
    status: int | None
    merged: bool = False  # the target of this hop had already been seen: the chain joins another


@dataclass(frozen=True, slots=True)
class Chain:
    start: str
    hops: tuple[Hop, ...]  # each redirect, start first
    final: str  # where the last hop points
    final_status: int | None  # its record's status; None if it has no record (out of scope, loop)
    final_error: str | None

    @property
    def merged(self) -> bool:
        return any(h.merged for h in self.hops)


@dataclass(slots=True)
class Report:
    source: str
    options: Options
    records: int = 0
    by_status: Counter = field(default_factory=Counter)  # status (int) or "none"
    by_error_kind: Counter = field(default_factory=Counter)
    broken: dict[str | None, list[Broken]] = field(default_factory=dict)  # via -> broken links on it
    chains: list[Chain] = field(default_factory=list)
    slowest: list[tuple[float, str, int | None]] = field(default_factory=list)  # (ms, url, status)
    retired_hosts: set[str] = field(default_factory=set)  # hosts retired after failures in a row
    more_pages: dict[str, int] = field(default_factory=dict)  # broken URL -> referring pages not listed
    unresolved: int = 0  # external links and requisites set aside: no external host resolved (offline)
    fragment_links: dict[str, int] = field(default_factory=dict)  # broken page -> fragment links into it
    dead_hosts: list[DeadHost] = field(default_factory=list)  # hosts that never answered, most URLs first
    _listed: dict[str, int] = field(default_factory=dict)  # broken URL -> pages listed so far
    tally: Tally = field(default_factory=Tally)  # outcomes (core/outcomes.py), as every surface counts them

    @property
    def broken_count(self) -> int:
        """Broken links: one a (page, target) pair listed."""
        return sum(len(v) for v in self.broken.values())

    @property
    def broken_urls(self) -> int:
        """Broken things, each once: distinct targets (a missing id is its `url#id`), however
        many pages refer to them; the fragments into a broken page are part of it."""
        return len({b.url for links in self.broken.values() for b in links})

    @property
    def ok(self) -> bool:
        return not self.broken and not self.dead_hosts

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "records": self.records,
            "broken_count": self.broken_count,
            "broken_urls": self.broken_urls,
            "broken": [
                {"page": via, "links": [_broken_dict(b, self.fragment_links) for b in links]}
                for via, links in self.broken.items()
            ],
            "dead_hosts": [
                {"host": d.host, "reason": d.reason, "error_kind": d.error_kind, "error": d.error, "kind": d.kind,
                 "urls": d.urls, "pages": list(d.pages), "more_pages": d.more_pages}
                for d in self.dead_hosts
            ],
            "redirect_chains": [
                {"start": c.start, "hops": [{"url": h.url, "status": h.status, "merged": h.merged} for h in c.hops],
                 "final": c.final, "final_status": c.final_status, "final_error": c.final_error, "merged": c.merged}
                for c in self.chains
            ],
            "slowest": [{"url": u, "elapsed_ms": ms, "status": st} for ms, u, st in self.slowest],
            "by_status": {str(k): v for k, v in sorted(self.by_status.items(), key=lambda kv: str(kv[0]))},
            "by_error_kind": dict(sorted(self.by_error_kind.items())),
            "retired_hosts": sorted(self.retired_hosts),
            "more_pages": dict(sorted(self.more_pages.items())),
            "unresolved": self.unresolved,
            "fragment_links": dict(sorted(self.fragment_links.items())),
            "outcomes": dict(self.tally.counts),
            "fetched_classes": dict(sorted(self.tally.classes.items())),
        }

    def refer(self, b: Broken) -> None:
        """One page referring to a broken thing: listed for the first KEEP_PAGES pages, then counted."""
        n = self._listed.get(b.url, 0)
        if n >= KEEP_PAGES:
            self.more_pages[b.url] = self.more_pages.get(b.url, 0) + 1
            return
        self._listed[b.url] = n + 1
        self.broken.setdefault(b.via, []).append(b)


def _broken_dict(b: Broken, fragment_links: dict[str, int]) -> dict[str, Any]:
    return {"url": b.url, "status": b.status, "error_kind": b.error_kind, "error": b.error, "discovery": b.discovery,
            "tag": b.tag, "kind": b.kind, "fragment_links": fragment_links.get(b.url, 0)}


# -- reading ---------------------------------------------------------------------------

def load(source: str) -> Iterator[dict[str, Any]]:
    """Records from a JSONL file or a --state file; ReportError on anything unreadable."""
    if not os.path.exists(source):
        raise ReportError(f"{source}: no such file")
    if os.path.isdir(source):
        raise ReportError(f"{source}: is a directory")
    try:
        with open(source, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise ReportError(f"{source}: cannot read ({exc.strerror})") from None
    if head == SQLITE_MAGIC:
        return _from_state(source)
    return _from_jsonl(source)


def _from_state(source: str) -> Iterator[dict[str, Any]]:
    try:
        _settings, conn = read_state(source)
    except StateError as exc:
        raise ReportError(str(exc)) from None
    try:
        yield from iter_records(conn)
    finally:
        conn.close()


MAX_LINE = 16 * MB  # a record's line: its lists are capped (MAX_PER_RECORD), so far below this


def _from_jsonl(source: str) -> Iterator[dict[str, Any]]:
    with open(source, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(lines(fh, MAX_LINE), 1):
            if line is None:  # (/dev/zero, or a file that is not records)
                raise ReportError(f"{source}: line {n} is longer than {MAX_LINE // MB} MB: not a crawltop record")
            if not line.strip():
                continue
            try:
                rec = loads(line)
            except ValueError:  # orjson refuses what json reads (NaN, a lone surrogate's escape): ask json
                try:
                    rec = json.loads(line)
                except ValueError:
                    raise ReportError(f"{source}: line {n} is not JSON (expected crawltop records, one per line)") \
                        from None
            if not isinstance(rec, dict) or not isinstance(rec.get("url"), str):
                raise ReportError(f"{source}: line {n} is not a crawltop record (no url)")
            yield rec


# -- analysis -------------------------------------------------------------------------

def _kind(rec: dict[str, Any]) -> str | None:
    """The record's error_kind; for records from before error_kind, one guessed from its error."""
    kind = rec.get("error_kind")
    if kind is None and rec.get("error"):  # records from before error_kind: still count them
        kind = "other" if not str(rec["error"]).startswith("BlockedByRobots") else "robots"
    return kind


def is_broken(rec: dict[str, Any], options: Options) -> bool:
    """A record is broken when its status >= `min_status` (400 by default) or it has an
    `error_kind`, except:
    - `robots` (a polite crawler's choice, not the site's fault) unless `include_robots`;
    - `cancelled` and `ignored` (never fetched: nothing is known about the URL);
    - the guessed /sitemap.xml of a site without one (hop path `M`, no `via`) answering
      404 or 410: a probe, not a link anyone wrote.
    """

    status, kind = rec.get("status"), _kind(rec)
    if kind is not None:
        if kind in NOT_BROKEN_KINDS or (kind == "robots" and not options.include_robots):
            return False
        return True
    if isinstance(status, int) and status >= options.min_status:
        return not (status in (404, 410) and rec.get("discovery") == "M" and rec.get("via") is None)
    return False


def analyse(records: Iterable[dict[str, Any]], options: Options = Options(), source: str = "") -> Report:
    """Records are read one at a time and only what is reported is kept (the broken ones, the
    redirect hops, the slowest few pages, the totals), so a report over millions stays small.
    Broken links are grouped by `via`, the page they are on (roots and unnamed sitemaps have none).
    """
    analysis = Analysis(options, source)
    for rec in records:
        analysis.add(rec)
    return analysis.report()


class Analysis:
    """`analyse`, a record at a time: the parent of a `--processes` crawl reads the crawl's
    records while its engines fetch (core/cluster/records.py Tail), so that the report is
    ready when they end instead of a second read of every record after them."""

    def __init__(self, options: Options = Options(), source: str = "") -> None:
        self.options = options
        self._report = Report(source=source, options=options)
        self._redirects: dict[str, dict[str, Any]] = {}
        self._outcome: dict[str, tuple[int | None, str | None]] = {}  # every URL's status and error
        self._slow: list[tuple[float, str, int | None]] = []
        self._broken: dict[str, Broken] = {}  # broken URL -> its finding, for the pages that refer to it later
        self._offline = _Offline()
        self._hosts: dict[str, _Host] = {}  # host[:port] -> whether it answered, how its URLs failed

    def add(self, rec: dict[str, Any]) -> None:
        report = self._report
        report.records += 1
        try:
            _add(report, rec, self.options, self._redirects, self._outcome, self._slow)
            _refs(report, rec, self.options, self._broken, self._offline, self._outcome)
            host = _host(rec["url"])
            (self._hosts.get(host) or self._hosts.setdefault(host, _Host())).saw(rec)
        except (TypeError, ValueError, AttributeError) as exc:  # a record with fields of the wrong type
            raise ReportError(f"{report.source}: record {report.records} is not a crawltop record ({exc})") from None

    def report(self) -> Report:
        """The Report of the records added so far (call it once, after the last)."""
        report, hosts = self._report, self._hosts
        aside: set[str] = set()
        if self._offline.is_offline(hosts):
            # a host retired after its names failed is as unchecked as they are
            aside = {n for n, h in hosts.items() if h.unreached and not h.own and h.why()[0] == "dns"}
            report.unresolved = self._offline.unresolved + sum(hosts[n].retired for n in aside)
            _drop(report, lambda b: _unresolved(b) or (b.tag != FRAGMENT and _host(b.url) in aside))
        _fold_fragments(report, self._outcome)
        report.fragment_links = {u: n for u, n in report.fragment_links.items() if u in self._broken}
        report.dead_hosts = _dead_hosts(report, {n: h for n, h in hosts.items() if h.dead and n not in aside})
        report.slowest = sorted(self._slow, reverse=True)
        report.chains = _chains(self._redirects, self._outcome)
        report.broken = dict(sorted(report.broken.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")))
        for links in report.broken.values():
            links.sort(key=lambda b: b.url)
        return report


def _host(url: str) -> str:
    """host[:port] of a record's URL (canonical; a foreign one must not crash)."""
    parts = str(url).split("/", 3)
    return parts[2] if len(parts) > 2 else str(url)


def _add(report: Report, rec: dict[str, Any], options: Options, redirects: dict[str, dict[str, Any]],
         outcome: dict[str, tuple[int | None, str | None]], slow: list[tuple[float, str, int | None]]) -> None:
    """Count one record in; TypeError if a field has the wrong type (not our record)."""
    url, status = rec["url"], rec.get("status")
    if status is not None and not isinstance(status, int):
        raise TypeError(f"status {status!r}")
    for name in ("via", "discovery", "next_url", "error_kind", "error", "content_type"):
        if rec.get(name) is not None and not isinstance(rec[name], str):
            raise TypeError(f"{name} {rec[name]!r}")
    report.by_status[status if status is not None else "none"] += 1
    report.tally.add(status, rec.get("error_kind"), rec.get("error"))  # core/outcomes.py: every surface's words
    if rec.get("error_kind"):
        report.by_error_kind[rec["error_kind"]] += 1
        if rec["error_kind"] == "host-retired":
            report.retired_hosts.add(_host(url))
    if rec.get("next_url"):
        redirects[url] = {"next": rec["next_url"], "status": status, "merged": bool(rec.get("merged")),
                          "discovery": rec.get("discovery") or "", "error": rec.get("error")}
    elif status is not None and str(rec.get("content_type") or "").startswith(("text/html", "application/xhtml")):
        item = (float(rec.get("elapsed_ms") or 0.0), url, status)
        if len(slow) < SLOWEST:
            heapq.heappush(slow, item)
        elif item > slow[0]:
            heapq.heapreplace(slow, item)
    outcome[url] = (status, rec.get("error"))


DEAD_MIN_URLS = 2  # a dead host with one URL keeps that URL's own finding: it says as much, and the URL


class _Host:
    """What the records say of one host: whether it ever answered, and how its URLs failed."""

    __slots__ = ("answered", "other", "own", "failed", "retired", "error_kind", "error", "retired_error", "kind")

    def __init__(self) -> None:
        self.answered = False  # some URL of it got an HTTP status
        self.other = False  # some URL of it failed in another way (reset, truncated, bad-url...)
        self.own = False  # some URL of it is a page of the site (in scope)
        self.failed = self.retired = 0  # URLs failed without reaching it; of them, retired
        self.error_kind: str | None = None  # its first failure that was not a retirement
        self.error: str | None = None
        self.retired_error: str | None = None  # its first retirement's text, when it has nothing else
        self.kind = ""

    def saw(self, rec: dict[str, Any]) -> None:
        kind = _kind(rec)
        if rec.get("kind") == "page":
            self.own = True
        if rec.get("status") is not None:
            self.answered = True
        elif kind in UNREACHED:
            self.failed += 1
            self.kind = self.kind or str(rec.get("kind") or "page")
            if kind == "host-retired":
                self.retired += 1
                self.retired_error = self.retired_error or rec.get("error")
            elif self.error_kind is None:
                self.error_kind, self.error = kind, rec.get("error")
        elif kind is not None and kind not in NOT_BROKEN_KINDS and kind != "robots":
            self.other = True

    @property
    def unreached(self) -> bool:
        """Every URL of it that was tried failed before an HTTP status."""
        return self.failed > 0 and not self.answered and not self.other

    @property
    def dead(self) -> bool:
        return self.unreached and self.failed >= DEAD_MIN_URLS

    def why(self) -> tuple[str | None, str | None]:
        """(error_kind, error) of its first real failure; when every URL was retired, the
        failure the retirement names (`(last: dns)`), with the retirement's text."""
        if self.error_kind is not None:
            return self.error_kind, self.error
        m = _RETIRED_LAST.search(self.retired_error or "")
        return (m.group(1) if m and m.group(1) in UNREACHED else "host-retired"), self.retired_error


class _Offline:
    """Most outside hosts' names failed (a machine without a network, like CI, or a resolver
    that knows only a few names): their DNS failures say nothing of the links, so they are
    set aside and counted, not reported. The rule is the crawl's own offline notice
    (core/queueing/follow.py): counted by host, at least OFFLINE_AFTER of them and
    OFFLINE_SHARE of the outside hosts heard of. Otherwise each host whose name failed is
    reported (once, as a `DeadHost`, when it had several URLs)."""

    def __init__(self) -> None:
        self.unresolved = 0

    def saw(self, rec: dict[str, Any]) -> None:
        if rec.get("kind") in ("external", "requisite") and rec.get("error_kind") == "dns":
            self.unresolved += 1

    def is_offline(self, hosts: dict[str, _Host]) -> bool:
        """A host with no page of the site counts as outside, a requisite's CDN too."""
        outside = [h for h in hosts.values() if not h.own and (h.answered or h.unreached)]
        fails = sum(1 for h in outside if h.unreached and h.why()[0] == "dns")
        return fails >= OFFLINE_AFTER and fails >= OFFLINE_SHARE * len(outside)


def _unresolved(b: Broken) -> bool:
    return b.kind in ("external", "requisite") and b.error_kind == "dns"


def _failed(outcome: dict[str, tuple[int | None, str | None]], url: str) -> bool:
    """The URL's record says it did not answer as itself: a status >= 400, or no status and an error."""
    status, error = outcome.get(url, (None, None))
    return (status or 0) >= 400 or (status is None and error is not None)


def _target(url: str) -> str:
    """The page of a `page#fragment` finding (a canonical URL has no `#` of its own)."""
    return url.partition("#")[0]


def _refs(report: Report, rec: dict[str, Any], options: Options, broken: dict[str, Broken],
          offline: _Offline, outcome: dict[str, tuple[int | None, str | None]]) -> None:
    """What the record says of broken things (core/queueing/findings.py): itself, under its
    `via` and its other referrers; the broken URLs its page refers to; missing fragments,
    except those into a page already known broken, which only count toward its finding."""
    url = rec["url"]
    offline.saw(rec)
    if is_broken(rec, options):
        discovery = rec.get("discovery") or ""
        tag = "redirect" if discovery.endswith("R") else word(discovery)  # its via is the redirect (or refresh)
        b = Broken(url, rec.get("via"), rec.get("status"), rec.get("error_kind"), rec.get("error"), discovery,
                   tag, rec.get("kind") or "page")
        broken[url] = b
        report.refer(b)
        for page, tag in rec.get("referrers") or ():
            report.refer(replace(b, via=str(page), tag=str(tag)))
        if rec.get("referrers_more"):
            report.more_pages[url] = report.more_pages.get(url, 0) + int(rec["referrers_more"])
    for target, tag in rec.get("broken_links") or ():
        found = broken.get(str(target))
        if found is not None:
            report.refer(replace(found, via=url, tag=str(tag)))
    counts = report.fragment_links
    for page, target, frag in rec.get("missing_fragments") or ():
        target = str(target)
        if _failed(outcome, target):
            counts[target] = counts.get(target, 0) + 1
        else:  # a fine page without the id, or one not recorded yet (`_fold_fragments` looks again)
            report.refer(Broken(f"{target}#{frag}", str(page), None, None, f"no element with id {frag!r}",
                                "", FRAGMENT, "page"))


def _drop(report: Report, picked: Callable[[Broken], bool]) -> tuple[list[Broken], dict[str, int]]:
    """Take the findings `picked` out of the report: them, and the counts of their pages not
    listed (`more_pages`; a URL counted there is listed under KEEP_PAGES pages first)."""
    dropped: list[Broken] = []
    for via, links in list(report.broken.items()):
        keep = [b for b in links if not picked(b)]
        if len(keep) == len(links):
            continue
        dropped += [b for b in links if picked(b)]
        if keep:
            report.broken[via] = keep
        else:
            del report.broken[via]
    more = {u: report.more_pages.pop(u) for u in {b.url for b in dropped} if u in report.more_pages}
    return dropped, more


def _fold_fragments(report: Report, outcome: dict[str, tuple[int | None, str | None]]) -> None:
    """A fragment link into a page that is itself broken is part of that page's finding, not a
    missing id: a 404 page has none of the ids its links name. Those found before the page's
    record are moved here from the listing into `fragment_links`."""
    dropped, more = _drop(report, lambda b: b.tag == FRAGMENT and _failed(outcome, _target(b.url)))
    counts = report.fragment_links
    for url, n in [(b.url, 1) for b in dropped] + list(more.items()):
        counts[_target(url)] = counts.get(_target(url), 0) + n


def _dead_hosts(report: Report, dead: dict[str, _Host]) -> list[DeadHost]:
    """One finding per host that never answered, its URLs' findings taken out of the listing;
    its referring pages are those the findings named, most links first."""
    if not dead:
        return []
    dropped, more = _drop(report, lambda b: b.tag != FRAGMENT and _host(b.url) in dead)
    pages: dict[str, Counter[str]] = {name: Counter() for name in dead}
    rest: Counter[str] = Counter()
    for b in dropped:
        if b.via is not None:
            pages[_host(b.url)][b.via] += 1
    for url, n in more.items():
        rest[_host(url)] += n
    out = []
    for name, h in dead.items():
        ranked = sorted(pages[name].items(), key=lambda kv: (-kv[1], kv[0]))
        kind, error = h.why()
        out.append(DeadHost(name, kind, error, h.kind, h.failed, tuple(p for p, _ in ranked[:KEEP_PAGES]),
                            max(0, len(ranked) - KEEP_PAGES) + rest[name]))
    out.sort(key=lambda d: (-d.urls, d.host))
    return out


def _chains(redirects: dict[str, dict[str, Any]], outcome: dict[str, tuple[int | None, str | None]]) -> list[Chain]:
    """One chain per redirect that was not itself reached by a redirect, followed to its end."""
    chains = []
    for start, first in redirects.items():
        if first["discovery"].endswith("R"):
            continue  # a middle hop: it shows in the chain of its start
        hops, url, seen = [], start, set()
        while url in redirects and url not in seen:
            seen.add(url)
            r = redirects[url]
            hops.append(Hop(url, r["status"], r["merged"]))
            if r["merged"]:  # the target is reached (and reported) on another path
                url = r["next"]
                break
            url = r["next"]
        status, error = outcome.get(url, (None, None))
        if url in seen:
            status, error = None, "redirect loop"
        chains.append(Chain(start, tuple(hops), url, status, error))
    chains.sort(key=lambda c: c.start)
    return chains
