"""`crawltop ls` and `crawltop ctl`: the live crawls, and one-shot control for scripts.

Both are plain blocking socket clients (core.remote.Client): no asyncio, no Textual.
`ctl` exits 0 on success and 1 with a one-line reason otherwise (an unknown name too).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..core.errors import RemoteError, UsageError
from ..core.remote import Client
from ..core.runtime import live_sockets, resolve, run_dir
from ..core.sanitize import clean

ACTIONS = {  # ctl action -> (protocol op, argument name or None)
    "pause": ("pause", None),
    "resume": ("resume", None),
    "stop": ("stop", None),
    "concurrency": ("set_concurrency", "n"),
    "cancel-worker": ("cancel_worker", "worker_id"),
    "status": ("status", None),
}


def add_arguments(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("ls", help="list the live crawls of this user")
    ls.add_argument("--json", action="store_true", help="one JSON array, for scripts (default: a table)")
    ctl = sub.add_parser("ctl", help="steer a live crawl from a script: exit 0, or 1 with a reason")
    ctl.add_argument("name", metavar="NAME", help="the crawl's name (crawltop ls)")
    ctl.add_argument("action", metavar="ACTION",
                     help="pause | resume | stop | concurrency N | cancel-worker ID | status | "
                          "ignore add|remove REGEX | ignore list | seed URL | host pause|resume HOST | "
                          "host delay HOST SECONDS | hosts [--sort KEY] [--state STATE] [--json]")
    ctl.add_argument("value", nargs="*", metavar="ARG", help="the action's arguments (see ACTION)")
    ctl.add_argument("--json", action="store_true",
                     help="hosts: one JSON object per host (default: a table)")
    ctl.add_argument("--sort", metavar="KEY", default="queued",
                     help="hosts: queued, errors, latency, wake, done or host (default: queued)")
    ctl.add_argument("--state", metavar="STATE", default=None, dest="host_state",
                     help="hosts: only hosts in this state: ready, fetching, waiting, backoff, paused, "
                          "budget, retired or done (default: all)")
    ctl.add_argument("--limit", metavar="N", type=int, default=None,
                     help="hosts: at most N rows (default: every host)")
    ctl.add_argument("--redis", metavar="URL", default=None,
                     help="a crawl shared through Redis: pause | resume | stop | concurrency N | status for the "
                          "whole crawl (default: the crawl's own socket on this machine)")
    ctl.add_argument("--process", metavar="PROC", default=None,
                     help="with --redis: only this process (host:pid:id, as `status` lists them)")


def run(args: argparse.Namespace) -> int:
    if args.command == "ctl" and args.redis:
        from .cluster import ctl

        return ctl(args)
    return run_ls(args) if args.command == "ls" else run_ctl(args)


def crawls(removed: list[Path] | None = None) -> list[dict[str, Any]]:
    """One row per live crawl, stale sockets cleaned up on the way (listed in `removed`)."""
    rows = []
    for path in live_sockets(removed):
        row: dict[str, Any] = {"name": path.name, "socket": str(path)}
        try:
            with Client(path, timeout=2.0) as c:
                row.update(c.call("status"))
        except RemoteError as exc:
            row.update(state="?", error=str(exc))
        rows.append(row)
    return rows


def run_ls(args: argparse.Namespace) -> int:
    removed: list[Path] = []
    try:
        run_dir(create=False)
        rows = crawls(removed)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    for path in removed:  # once: the socket is gone now, so the next ls is silent about it
        print(f"crawltop: removed {path}: its crawl is gone (nothing listened on it)", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=None))
        return 0
    if not rows:
        print("no live crawls")
        return 0
    table = [("NAME", "PID", "STATE", "MODE", "PAGES", "QUEUED", "PAGES/S", "STARTED", "ROOT")]
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"])) if "started" in r else "?"
        table.append((r["name"], str(r.get("pid", "?")), r.get("state", "?"), r.get("mode", "?"), str(r.get("pages", "?")),
                      str(r.get("queued", "?")), f"{r['rate_now']:.0f}" if "rate_now" in r else "?",
                      started, clean(r.get("root", ""), 80)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def _fail(message: str) -> int:
    print(f"crawltop: {clean(message, 300)}", file=sys.stderr)
    return 1


def run_ctl(args: argparse.Namespace) -> int:
    if args.action == "hosts":
        return run_hosts(args)
    if args.action in STEER_ACTIONS:
        return run_steer(args)
    args.value = args.value[0] if len(args.value) == 1 else (None if not args.value else args.value)
    if isinstance(args.value, list):
        return _fail(f"{args.action} takes at most one value")
    if args.action not in ACTIONS:
        return _fail(f"unknown action {args.action!r}: pause, resume, stop, concurrency N, cancel-worker ID, status")
    op, arg = ACTIONS[args.action]
    kwargs: dict[str, Any] = {}
    if arg is not None:
        try:
            value = int(args.value)
        except (TypeError, ValueError):
            return _fail(f"{args.action} needs a whole number, got {args.value!r}")
        if value < 1 or value > 10_000:
            return _fail(f"{args.action}: {value} is out of range (1-10000)")
        kwargs[arg] = value
    elif args.value is not None:
        return _fail(f"{args.action} takes no value")
    try:
        path = resolve(args.name)
        with Client(path) as c:
            result = c.call(op, **kwargs)
    except (UsageError, RemoteError, OSError) as exc:
        return _fail(str(exc))
    if op == "status":
        print(json.dumps(result))
    elif op == "cancel_worker" and not result["result"]:
        return _fail(f"no worker {kwargs['worker_id']} in crawl {args.name!r}")
    return 0


# -- steering (issue 11): ignores, seeds, hosts ---------------------------------------------
STEER_ACTIONS = ("ignore", "seed", "host")
STEER_USAGE = {
    "ignore": "ignore add REGEX | ignore remove REGEX | ignore list",
    "seed": "seed URL",
    "host": "host pause HOST | host resume HOST | host delay HOST SECONDS",
}


def _steer_request(action: str, words: list[str]) -> tuple[str, dict[str, Any]] | str:
    """(protocol op, args) for `ctl NAME ACTION WORDS...`, or the usage line if malformed."""
    sub, rest = (words[0], words[1:]) if words else ("", [])
    if action == "ignore":
        if sub == "list" and not rest:
            return "ignores", {}
        if sub in ("add", "remove") and len(rest) == 1:
            return f"ignore_{sub}", {"pattern": rest[0]}
    elif action == "seed" and len(words) == 1:
        return "seed_add", {"url": words[0]}
    elif action == "host":
        if sub in ("pause", "resume") and len(rest) == 1:
            return f"host_{sub}", {"host": rest[0]}
        if sub == "delay" and len(rest) == 2:
            try:
                return "host_delay", {"host": rest[0], "seconds": float(rest[1])}
            except ValueError:
                return f"host delay: not a number of seconds: {rest[1]!r}"
    return f"usage: crawltop ctl NAME {STEER_USAGE[action]}"


def run_steer(args: argparse.Namespace) -> int:
    """Ignores, seeds and hosts: exit 0 and print the outcome, or 1 with the reason."""
    req = _steer_request(args.action, list(args.value))
    if isinstance(req, str):
        return _fail(req)
    op, kwargs = req
    try:
        with Client(resolve(args.name)) as c:
            result = c.call(op, **kwargs)["result"]
    except (UsageError, RemoteError, OSError) as exc:
        return _fail(str(exc))
    if op == "ignores":
        for rule in result:
            print(json.dumps(rule))
    elif op in ("ignore_add", "seed_add"):
        if not result["ok"]:
            return _fail(result["error"])
        print(f"ignoring {result['pattern']}: {result['dropped']} queued URLs dropped" if op == "ignore_add"
              else f"added {result['url']}")
    elif op == "ignore_remove" and not result:
        return _fail(f"no ignore pattern {kwargs['pattern']!r} in crawl {args.name!r}")
    elif op == "host_pause" and not result:
        return _fail(f"host {kwargs['host']!r} is already paused")
    elif op == "host_resume":
        print(f"host {kwargs['host']} resumed: {result} URLs back on the queue")
    return 0


# -- the host table (issue 19): the queues view for scripts -----------------------------------
HOST_COLUMNS = ("HOST", "STATE", "QUEUED", "FLIGHT", "DONE", "ERRORS", "DELAY", "SOURCE", "AVG_MS", "OVER")


def run_hosts(args: argparse.Namespace) -> int:
    """`ctl NAME hosts [--sort KEY] [--state STATE] [--limit N] [--json]`: every host's queue
    row as the queues view (`H`) shows it. A bad key or state is a usage error (exit 2)."""
    from ..core.hosttext import delay_text, state_text
    from ..core.stats import HostView
    from ..core.steer import HOST_SORTS, STATES

    if args.value:
        raise UsageError("hosts takes no value: crawltop ctl NAME hosts [--sort KEY] [--state STATE] [--json]")
    if args.sort not in HOST_SORTS:
        raise UsageError(f"--sort is one of {', '.join(HOST_SORTS)}, not {args.sort!r}")
    if args.host_state is not None and args.host_state not in STATES:
        raise UsageError(f"--state is one of {', '.join(STATES)}, not {args.host_state!r}")
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit is a number of rows, not {args.limit}")
    kwargs: dict[str, Any] = {"sort": args.sort}
    if args.host_state is not None:
        kwargs["state"] = args.host_state
    if args.limit is not None:
        kwargs["limit"] = args.limit
    try:
        with Client(resolve(args.name)) as c:
            rows = c.call("hosts", **kwargs)["result"]
    except (RemoteError, OSError) as exc:
        return _fail(str(exc))
    if args.json:
        for row in rows:
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))
        return 0
    table = [HOST_COLUMNS]
    names = {f for f in HostView.__dataclass_fields__}
    for row in rows:
        h = HostView(**{k: v for k, v in row.items() if k in names})
        table.append((clean(h.host, 200), state_text(h) or "-", str(h.queued), str(h.in_flight), str(h.done),
                      str(h.errors), delay_text(h) or "0", h.source or "-",
                      f"{h.avg_ms:.0f}" if h.done else "-", str(h.over)))
    widths = [max(len(row[i]) for row in table) for i in range(len(HOST_COLUMNS))]
    right = {2, 3, 4, 5, 8, 9}
    for row in table:
        print("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return 0
