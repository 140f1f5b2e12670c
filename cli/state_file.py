"""The CLI side of crash-safe state: `crawl --state`, `resume` and `--warc`.

The commands (cli/commands/) add `--warc` with `add_warc()` and call `run()` for a crawl
that keeps a state file.  Imports run one way: commands -> state -> options, run.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sqlite3
import sys
from collections.abc import Sequence

from ..core.config import CrawlConfig
from ..core.crawler import Crawler
from ..core.errors import StateError
from ..core.monitor.sanitize import clean
from ..core.output.records import Sink
from ..core.secrets import require
from ..core.storage.open_state import open_state
from ..core.storage.store import STATUS_FINISHED, STATUS_STOPPED, SqliteStore
from . import archive
from .endreport import TOP, Left, Totals, number, render, roots_title
from .options import Parser, add_crawl_options, add_warc, config_from
from .run import run_crawler

# argparse dest -> CrawlConfig field, for options that a resume may override
_FIELD = {"no_robots": "robots", "no_sitemaps": "sitemaps", "no_requisites": "requisites",
          "no_external": "external", "no_fragments": "fragments", "ignore_set": "ignore_sets",
          "no_ignore_set": "ignore_sets", "header": "headers", "header_host": "header_hosts", "no_proxy": "env_proxy"}
COUNTERS = "report_counters"  # the setting: time, retries, sitemap probes of the runs so far (no record holds them)
_NOT_CONFIG = {"headless", "exit_on_finish", "warc", "state", "fast", "command", "roots", "_pos",
               "warc_max_size", "no_dedup", "dedup_from", "wacz"}


def extra_sinks(args: argparse.Namespace, config: CrawlConfig, shared: tuple[str, str] | None = None) -> list[Sink]:
    """Sinks for a crawl without --state: the WARC of --warc (cli/archive.py); `shared`:
    the (Redis URL, name) of a shared crawl."""
    options = archive.options_of(args)
    return [archive.sink(options, config, shared)] if options else []


def explicit_options(argv: Sequence[str], command: str) -> set[str]:
    """The dests of the options actually given after `command` (not their defaults)."""
    p = Parser(prog=f"crawltop {command}", add_help=False)
    p.add_argument("_pos", nargs="*")
    add_crawl_options(p)
    add_warc(p)
    p.add_argument("--state")
    if command == "demo":
        p.add_argument("--fast", action="store_true")
    for action in p._actions:  # only what is on the command line lands in the namespace
        action.default = argparse.SUPPRESS
    argv = list(argv)
    rest = argv[argv.index(command) + 1:] if command in argv else argv
    given, _ = p.parse_known_args(rest)
    return set(vars(given)) - {"_pos"}


def overrides_from(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, object]:
    """CrawlConfig fields the user set on this command line."""
    given = explicit_options(argv, args.command) - _NOT_CONFIG
    if not given:
        return {}
    full = config_from(args, ("http://placeholder.invalid/",))
    fields = {f.name for f in dataclasses.fields(CrawlConfig)}
    out: dict[str, object] = {}
    for dest in given:
        name = _FIELD.get(dest, dest)
        if name in fields:
            out[name] = getattr(full, name)
    return out


def run(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """`crawl --state PATH` or `resume PATH`; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _crawl(args, argv)
    except StateError as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2


def _crawl(args: argparse.Namespace, argv: list[str]) -> int:
    path = args.state
    resume_only = args.command == "resume"
    config = None if resume_only else config_from(args, args.roots)
    overrides = overrides_from(args, argv)
    # Paths are kept absolute in the state, so a resume from another directory finds them.
    if config is not None and config.output:
        config = dataclasses.replace(config, output=os.path.abspath(config.output))
    if overrides.get("output"):
        overrides["output"] = os.path.abspath(str(overrides["output"]))
    config, store = open_state(path, config, overrides, resume_only=resume_only)
    try:
        config = _secrets(config, store, overrides, path)
        saved_sets = store.settings.get("ignore_sets")  # turned on or off live (core/steering/steer.py)
        if store.resumed and "ignore_sets" not in overrides and isinstance(saved_sets, list):
            config = dataclasses.replace(config, ignore_sets=tuple(str(s) for s in saved_sets))
        if store.finished:
            print(f"crawltop: {clean(path)}: this crawl already finished ({store.resumed_records} records); "
                  f"nothing to do. Export its records with: crawltop export {clean(path)} --jsonl FILE",
                  file=sys.stderr)
            return 0
        headless = args.headless or not sys.stdout.isatty()
        if config.start_paused and headless:
            print("crawltop: the crawl was quit while paused; headless runs cannot be unpaused, "
                  "so it resumes running", file=sys.stderr)
            config = dataclasses.replace(config, start_paused=False)
        if store.resumed:
            print(f"crawltop: resuming {clean(path)}: {number(store.resumed_records)} records carried over, "
                  f"{number(store.size)} URLs queued ({number(store.recovered_in_flight)} were in flight at a kill)",
                  file=sys.stderr)
        crawler = Crawler(dataclasses.replace(config, output=None), frontier=store, sinks=[store.sink])
        crawler.stats.resumed_from = store.resumed_records
        warc = _add_output_sinks(crawler, args, config, store)
        code = run_crawler(crawler, args, lambda: report(crawler, store))
        status = STATUS_FINISHED if store.unfinished == 0 else STATUS_STOPPED
        store.save_session(status=status, paused=crawler.paused, concurrency=crawler.concurrency)
        earlier = Totals().with_saved(store.settings.get(COUNTERS))
        store.set_setting(COUNTERS, (earlier + Totals.of_snapshot(crawler.stats.snapshot())).saved())
        return archive.wacz(warc) or code
    finally:
        store.close()


def report(crawler: Crawler, store: SqliteStore) -> str:
    """The end report of the whole crawl, not just this run. A resumed crawl is counted
    from every record in the file, as `crawltop report STATE` counts it (a URL whose record
    a kill left uncommitted was fetched again, so each is there once), with the time, retries
    and sitemap probes of the earlier runs (COUNTERS: a run killed before its end leaves
    none) and this run's; URLs still queued are kept for the next resume."""
    s = crawler.stats.snapshot()
    totals = Totals.of_snapshot(s, crawler.stats.top_error_urls(TOP))
    notes = []
    if store.resumed:
        notes.append(f"resumed: {number(store.resumed_records)} records carried over from earlier runs")
        try:
            store.flush()  # this run's last records too (the crawl is over: nothing waits on the loop)
            earlier = Totals().with_saved(store.settings.get(COUNTERS))
            totals = earlier + Totals.of_records(store.records()).with_run(s)
        except (sqlite3.Error, StateError, LookupError, TypeError, ValueError) as exc:  # the run's own, and why
            notes.append(f"this run only: the earlier records could not be read ({clean(exc, 200)})")
    left = store.unfinished
    hint = f"resume with: crawltop resume {shlex.quote(store.path)}"
    return render(roots_title(crawler.roots), totals, left=Left(left, kept=True, hint=hint) if left else None,
                  notes=notes)


def _secrets(config: CrawlConfig, store: SqliteStore, overrides: dict[str, object], path: str) -> CrawlConfig:
    """A resumed crawl's secrets come from this command line (the state holds
    them redacted: refused with the list of what is missing); its cookie jar lives beside
    the state file, 0600, never in it, and on resume it replaces the --cookies file read
    the first time (it holds those cookies, as the servers left them)."""
    if store.resumed and not store.finished:
        require(config, f"resuming {path}")
    jar = os.path.abspath(path) + ".cookies"
    if store.resumed and "cookies" not in overrides and os.path.exists(jar):
        config = dataclasses.replace(config, cookies=None)
    return dataclasses.replace(config, cookie_jar=jar)


def _add_output_sinks(crawler: Crawler, args: argparse.Namespace, config: CrawlConfig,
                      store: SqliteStore) -> dict[str, object] | None:
    if config.output:
        # With a state file the JSONL is written by the store after each commit, and a
        # resume first copies what a kill left unwritten: the file always equals `export`.
        store.attach_jsonl(config.output)
        if store.jsonl_caught_up:
            print(f"crawltop: {clean(config.output)}: {store.jsonl_caught_up} records copied from the state "
                  "(committed but not yet written out when the last run stopped)", file=sys.stderr)
    saved = store.settings.get("warc_options")
    if not isinstance(saved, dict):  # an older state file kept only the path, no warc_options
        saved = {"warc": store.settings["warc"]} if store.settings.get("warc") else None
    warc = archive.options_of(args, saved)
    if warc:
        store.set_setting("warc", warc["warc"])
        store.set_setting("warc_options", warc)
        crawler.sinks.append(archive.sink(warc, config))
    return warc
