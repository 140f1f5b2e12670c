"""`crawltop ctl NAME ACTION`: one-shot control of a live crawl, for scripts.

A plain blocking socket client (core/sockets/blocking.py Client): no asyncio, no Textual. Exit 0 on
success and 1 with a one-line reason otherwise (an unknown name too); with `--redis`,
the whole crawl shared through Redis (or one of its processes).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ...core.errors import RemoteError, UsageError
from ...core.monitor.sanitize import clean
from ...core.sockets.blocking import Client
from ...core.sockets.rundir import resolve

ACTIONS = {  # ctl action -> (protocol op, argument name or None)
    "pause": ("pause", None),
    "resume": ("resume", None),
    "stop": ("stop", None),
    "concurrency": ("set_concurrency", "n"),
    "cancel-worker": ("cancel_worker", "worker_id"),
    "status": ("status", None),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    ctl = sub.add_parser("ctl", help="steer a live crawl from a script: exit 0, or 1 with a reason")
    ctl.add_argument("name", metavar="NAME", help="the crawl's name (crawltop ls)")
    ctl.add_argument("action", metavar="ACTION",
                     help="pause | resume | stop | concurrency N | cancel-worker ID | status | "
                          "ignore add|remove REGEX | ignore list | ignore sets | ignore set NAME on|off | "
                          "seed URL | host pause|resume HOST | "
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


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    if args.redis:
        return run_shared(args)
    return run_ctl(args)


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
            before = c.call("status") if op == "stop" else None
            result = c.call(op, **kwargs)
    except (UsageError, RemoteError, OSError) as exc:
        return _fail(str(exc))
    if before is not None:
        print(stop_words(args.name, before))
    if op == "status":
        print(json.dumps(result))
    elif op == "cancel_worker" and not result["result"]:
        return _fail(f"no worker {kwargs['worker_id']} in crawl {args.name!r}")
    return 0


def stop_words(name: str, status: dict[str, Any]) -> str:
    """What `ctl NAME stop` did: `stopping 'demo': 7 in flight and 1,152 queued cancelled (not errors)`."""
    if status.get("state") in ("STOPPING", "DONE"):
        return f"{clean(name, 100)!r} is already {str(status.get('state')).lower()}"
    busy, queued = int(status.get("busy", 0)), int(status.get("queued", 0))
    if status.get("keeps_queue"):
        return f"stopping {clean(name, 100)!r}: {busy:,} in flight put back, {queued:,} queued kept to resume"
    return f"stopping {clean(name, 100)!r}: {busy:,} in flight and {queued:,} queued cancelled (not errors)"


# -- steering: ignores, seeds, hosts --------------------------------------------------------
STEER_ACTIONS = ("ignore", "seed", "host")
STEER_USAGE = {
    "ignore": "ignore add REGEX | ignore remove REGEX | ignore list | ignore sets | ignore set NAME on|off",
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
        if sub == "sets" and not rest:
            return "ignore_sets", {}
        if sub == "set" and len(rest) == 2 and rest[1] in ("on", "off"):
            return "ignore_set", {"name": rest[0], "on": rest[1] == "on"}
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
    if op in ("ignores", "ignore_sets"):
        for rule in result:
            print(json.dumps(rule))
    elif op == "ignore_set":
        if not result["ok"]:
            return _fail(result["error"])
        print(f"ignore set {kwargs['name']} on: {result['dropped']} queued URLs dropped" if kwargs["on"]
              else f"ignore set {kwargs['name']} off")
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


# -- the host table: the queues view for scripts ----------------------------------------------
HOST_COLUMNS = ("HOST", "STATE", "QUEUED", "FLIGHT", "DONE", "ERRORS", "DELAY", "SOURCE", "AVG_MS", "OVER")


def run_hosts(args: argparse.Namespace) -> int:
    """`ctl NAME hosts [--sort KEY] [--state STATE] [--limit N] [--json]`: every host's queue
    row as the queues view (`H`) shows it. A bad key or state is a usage error (exit 2)."""
    from ...core.monitor.hosttext import delay_text, state_text
    from ...core.monitor.stats import HostView
    from ...core.steering.steer import HOST_SORTS, STATES

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
        cells = enumerate(zip(row, widths, strict=False))
        print("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in cells).rstrip())
    return 0


# -- a crawl shared through Redis: the whole crawl, or one of its processes -----------------------
def run_shared(args: argparse.Namespace) -> int:
    """`crawltop ctl NAME --redis URL ACTION [--process PROC]`: exit 0, or 1 with a reason."""
    import asyncio
    import dataclasses

    from ...core.cluster import commands
    from ...core.cluster import connect as cluster
    from ...core.cluster.keys import Keys, text
    from ...core.cluster.view import ClusterView
    from ...core.monitor.summary import browser_numbers
    from ...core.sockets.rundir import check_name

    name = check_name(args.name)
    op = {"pause": "pause", "resume": "resume", "stop": "stop", "concurrency": "concurrency"}.get(args.action)
    if op is None and args.action != "status":
        raise UsageError(f"with --redis, ACTION is pause, resume, stop, concurrency N or status, not {args.action!r}")
    if op == "concurrency" and (len(args.value) != 1 or not args.value[0].isdigit()):
        raise UsageError("concurrency needs one number: crawltop ctl NAME --redis URL concurrency N")

    async def run() -> int:
        r = cluster.client(args.redis)
        try:
            await cluster.join(r, args.redis, name, resume=False)
            view = ClusterView(r, name, [])
            if args.process and args.process not in {text(p) for p in await r.hkeys(Keys(name).procs)}:
                print(f"crawltop: no process {args.process!r} in crawl {name!r}", file=sys.stderr)
                return 1
            if op is not None:
                await commands.command(r, Keys(name), op, int(args.value[0]) if op == "concurrency" else None,
                                       args.process)
            await view.read()
            snap = view.stats.snap
            print(json.dumps({"name": name, "status": view.status, "state": snap.state, "records": view.records,
                              "pages": snap.pages, "requisites": snap.requisites, "externals": snap.externals,
                              "queued": snap.queued, "seen": snap.seen,
                              "in_flight": snap.in_flight,
                              # summed over the crawl's partitions, as the counts above
                              "hosts": view.totals["hosts"], "hosts_retired": view.totals["retired"],
                              "over_budget": view.totals["over"], "partitions": len(view.partitions or ()),
                              # --browser: the engines' Chromiums summed (each process's own below)
                              "browser": browser_numbers(snap.browser) or None, "processes": [
                                  {"proc": p.proc, **dataclasses.asdict(p.info), "lost": p.lost, "leases": p.leases,
                                   "heartbeat_age": round(p.beat_age, 1)} for p in view.processes()],
                              # a Redis Cluster's masters: keys, memory, the crawl's slot (none on a plain Redis)
                              "nodes": [n.to_dict() for n in view.nodes()]}))
            return 0
        finally:
            await r.aclose()

    return asyncio.run(run())
