"""This process as one engine of a crawl shared through Redis (`crawl --redis`, `join`),
and the whole crawl's end report, which the last process out writes (or the parent of
`--processes`)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

import redis

from ..core.cluster import connect as cluster
from ..core.cluster.combine import merge
from ..core.cluster.keys import Keys, text
from ..core.cluster.member import LIVE, Member
from ..core.cluster.records import StreamRecords
from ..core.cluster.totals import totals_sync
from ..core.cluster.view import ClusterView
from ..core.config import CrawlConfig
from ..core.crawler import Crawler
from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.sockets.protocol import SnapshotDecoder
from . import hangup
from .endreport import Left, Totals, number, one_process, render, roots_title
from .listen import listen
from .run import run_crawler
from .state_file import extra_sinks


def engine(args: argparse.Namespace, url: str, name: str, config: CrawlConfig) -> int:
    """This process as one engine of crawl NAME, with its TUI (the whole crawl's numbers,
    its processes panel) or headless."""
    frontier = cluster.frontier(url, name, config)
    crawler = Crawler(config, frontier=frontier, sinks=[frontier.sink, *extra_sinks(args, config, (url, name))])
    reports = not getattr(args, "no_final_report", False)
    member = Member(crawler, frontier, reports=reports)
    args.socket_base, args.name = name, None  # sockets NAME, NAME-2, ...: one per process here

    def end() -> str:
        return _end_report(member, url, name, reports)

    if args.headless or not sys.stdout.isatty():
        code = run_crawler(member, args, end)
    else:  # the TUI shows the whole crawl; the socket (ctl, attach) stays this process's own
        from ..tui.app import run_tui

        local = listen(member, args)
        local.control.mode = "tui"
        view = ClusterView(frontier.redis, name, list(crawler.roots), local=local, lease=frontier.lease)
        code = run_tui(view,
                       exit_on_finish=args.exit_on_finish,
                       hangup=hangup.Hangup(getattr(args, "on_hangup", "detach"), local.control))
        sys.stdout.write(end())
    records = crawler.stats.records
    # (plain numbers: bench/politeness.py reads this line)
    print(f"  redis: {frontier.round_trips} round trips for {records} records "
          f"({frontier.round_trips / max(1, records):.2f} per record, heartbeats included)", file=sys.stdout)
    if not member.left:
        print(f"crawltop: Redis unreachable at exit: the URLs this process held go back on the "
              f"queue when their leases run out ({frontier.lease:g} s)", file=sys.stderr)
    return code


def _end_report(member: Member, url: str, name: str, reports: bool) -> str:
    """The whole crawl's report if this process is the last one out of it (finished, or
    stopped with nobody left to go on: its queue stays in Redis for a join); else this
    process's own part, in the same form."""
    whole = ""
    if reports and member.reporter:
        whole = f"crawl {name!r} finished; this was its last process"
    elif reports and member.left and _last_out(url, name):
        whole = f"crawl {name!r} is not finished and no other process is left"
    if whole:
        print(f"{whole}: the whole crawl's report follows. "
              f"Records: crawltop export --redis {shown_url(url)} {name} --jsonl FILE", file=sys.stderr)
        try:
            return whole_report(url, name, keep=shown_url(url))
        except Exception as exc:  # the crawl is done and its records are safe in Redis: say why, no traceback
            print(f"crawltop: the whole crawl's report could not be made: {clean(exc)}", file=sys.stderr)
    return one_process(member, notes=[f"this process's part of crawl {name!r} on Redis "
                                      f"(the whole crawl's report is written by its last process out)"])


def _last_out(url: str, name: str) -> bool:
    """The crawl is not finished and no process beats any more (a `q` here stops this
    process, `ctl stop` every one): nobody else is left to report it."""
    r = cluster.sync_client(url, socket_timeout=5)
    try:
        k = Keys(name)
        if text(r.hget(k.meta, "status") or b"") == "finished":
            return False  # (its report is claimed: Member.reporter)
        secs, micros = r.time()
        now = secs * 1000 + micros // 1000
        return all(int(beat) < now - LIVE * 1000 for beat in r.hvals(k.beats))
    except redis.RedisError:
        return False
    finally:
        r.close()


def shown_url(url: str) -> str:
    """A Redis URL to print: its password, if any, left out."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:PASSWORD@{host}"))


def whole_report(url: str, name: str, *, totals: Totals | None = None, wall: float = 0.0,
                 keep: str | None = None) -> str:
    """The end report of crawl NAME on Redis, every process's (cli/endreport.py). Counts come
    from its records, each URL's once (`totals` if the caller read them as they came, else the
    stream is read now); time, retries and sitemap probes from the processes' final snapshots
    (merged as the monitor merges them; `wall` seconds if none is left). URLs still queued
    are kept when the Redis stays (`keep`: its URL, to join with), else cancelled."""
    k = Keys(name)
    r = cluster.sync_client(url, socket_timeout=30)
    try:
        if totals is None:
            totals = Totals.of_records(StreamRecords(r, name))
        procs = sorted({text(p) for p in r.smembers(k.left)} | {text(p) for p in r.hkeys(k.procs)})
        snaps = _snapshots(r.mget([k.snap(p) for p in procs]) if procs else [])
        sums = totals_sync(r, name)  # every partition's
        queued = sums["queued"] + sums["leased"]
        roots = [str(u) for u in json.loads(r.hget(k.meta, "roots") or b"[]")]
    finally:
        r.close()
    totals = totals.with_run(merge(snaps, state="DONE", queued=0, seen=0, in_flight=0)) if snaps else \
        dataclasses.replace(totals, elapsed=wall)
    if keep is not None:
        left = Left(queued, kept=True, hint=f"join with: crawltop join {name} --redis {keep}")
    else:
        left = Left(queued, kept=False, hint="never fetched: the private redis-server ends with the crawl")
    return render(roots_title(roots) or name, totals, left=left if queued else None,
                  notes=[f"crawl {name!r} on Redis, {number(len(procs))} process{'es' if len(procs) != 1 else ''}"])


def _snapshots(raws: Sequence[bytes | str | None]) -> list[Snapshot]:
    """The processes' snapshots that are there and readable (one that is not costs its
    process's time and retries, not the report)."""
    out = []
    for raw in raws:
        if raw is not None:
            try:
                out.append(SnapshotDecoder().decode(json.loads(raw)))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                continue
    return out


def write_report(make: Callable[[], str]) -> None:
    """The whole crawl's report on stdout; if it can't be made or written, one line on stderr."""
    try:
        sys.stdout.write(make())
        sys.stdout.flush()
    except Exception as exc:  # the crawl is done and its records are safe in Redis: say why, no traceback
        print(f"crawltop: the final report could not be written: {clean(exc)}", file=sys.stderr)
