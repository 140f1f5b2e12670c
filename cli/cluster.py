"""`crawl --redis URL`, `join NAME --redis URL`, `crawl --processes N`, `export --redis`.

One crawl, its state in Redis (core/cluster/), any number of engine processes. The
first command creates the crawl NAME (or continues it with the same settings); `join`
adds a process with the crawl's own settings and its own -c, -o. `--processes N` starts
N engine processes here, each a `join` child, against `--redis` or a private
redis-server on a Unix socket in the state directory, stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import redis

from ..core.cluster import commands
from ..core.cluster import open as cluster
from ..core.cluster.keys import Keys
from ..core.cluster.member import Member
from ..core.cluster.records import StreamRecords
from ..core.cluster.server import RedisServer, die_with_parent
from ..core.cluster.view import ClusterView
from ..core.config import CrawlConfig
from ..core.crawler import Crawler
from ..core.errors import UsageError
from ..core.export import export_csv, export_jsonl
from ..core.runtime import check_name, default_base, state_dir
from ..core.sanitize import clean
from ..core.secrets import require
from . import hangup
from .listen import listen
from .options import add_crawl_options, add_session_options, positive, session_options
from .run import run_crawler
from .state import extra_sinks

PROGRESS_EVERY = 2.0


def add_arguments(sub: argparse._SubParsersAction, *parsers: argparse.ArgumentParser) -> None:
    for p in parsers:
        p.add_argument("--redis", metavar="URL", default=None,
                       help="share the crawl through Redis (redis://HOST:PORT/DB or unix:///PATH): "
                            "other processes `join` it (default: this process only)")
        p.add_argument("--processes", type=positive(int), default=None, metavar="N",
                       help="N engine processes on this machine and one monitor; without --redis a private redis-server "
                            "is started (default: this process is the engine)")
    join = sub.add_parser("join", help="add this process to a crawl shared through Redis")
    join.add_argument("name", metavar="NAME", help="the crawl's name (its --name)")
    join.add_argument("--redis", metavar="URL", required=True, help="the crawl's Redis (as given to crawl --redis)")
    join.add_argument("-c", "--concurrency", type=positive(int), default=None, metavar="N",
                      help="worker tasks in this process (default: the crawl's)")
    join.add_argument("--output", "-o", default=None, metavar="FILE.jsonl",
                      help="also write the records this process fetches to this file (default: none)")
    join.add_argument("--headless", action="store_true", help="no TUI (default when stdout is not a TTY)")
    join.add_argument("--exit-on-finish", action="store_true", help="TUI: close when the crawl ends")
    join.add_argument("--detach", action="store_true", help="run in the background (default: off)")
    hangup.add_argument(join)
    add_session_options(join, join=True)  # the secrets: never in Redis, given to each process
    # --processes' children: their parent writes the whole crawl's report, once
    join.add_argument("--no-final-report", action="store_true", help=argparse.SUPPRESS)
    crawl_level(join)


class _CrawlLevel(argparse.Action):
    """A crawl option given to `join`: one line and exit 2, not argparse's "unrecognized"."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.error(f"{option_string}: that is a crawl-level setting taken from Redis; join uses the crawl's own "
                     f"(set it on the first `crawl --redis`)")


def crawl_level(join: argparse.ArgumentParser) -> None:
    """Every crawl option join does not take itself is known to it, to be refused clearly."""
    probe = argparse.ArgumentParser(add_help=False)
    add_crawl_options(probe)
    taken = set(join._option_string_actions)
    for action in probe._actions:
        strings = [o for o in action.option_strings if o not in taken]
        if strings:
            join.add_argument(*strings, action=_CrawlLevel, nargs=0 if action.nargs == 0 else "?",
                              default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # (no attribute when absent)


def wants_cluster(args: argparse.Namespace) -> bool:
    return args.command == "join" or bool(getattr(args, "redis", None)) or bool(getattr(args, "processes", None))


def check_mix(args: argparse.Namespace) -> None:
    """Options that cannot go with a shared crawl: a one-line refusal, not a silent ignore."""
    if not wants_cluster(args) or args.command in ("join", "export"):
        return
    if getattr(args, "state", None):
        raise UsageError("--state and --redis/--processes don't mix: a shared crawl keeps its state in Redis")
    if args.processes and getattr(args, "warc", None):
        raise UsageError("--warc needs one process: with --processes, keep -o per process instead")
    if args.processes and getattr(args, "detach", False):
        raise UsageError("--detach and --processes don't mix: start with crawl --redis URL --detach, "
                         "then add engines with join NAME --redis URL --detach")


def name_of(args: argparse.Namespace, roots: Sequence[str]) -> str:
    if getattr(args, "name", None):
        return check_name(args.name)
    return "demo" if args.command == "demo" else default_base(urlsplit(roots[0]).hostname)


def run(args: argparse.Namespace, config: CrawlConfig | None) -> int:
    """`crawl`/`demo` with --redis or --processes (config given), or `join` (None)."""
    if args.command == "join":
        name = check_name(args.name)
        config, status = asyncio.run(_join(args.redis, name))
        if status == "finished":
            return _finished(args.redis, name)
        overrides = {"output": args.output, **({"concurrency": args.concurrency} if args.concurrency else {})}
        config = dataclasses.replace(config, **overrides, **_own_secrets(args))
        require(config, f"joining {name}")
        return _engine(args, args.redis, name, config)
    assert config is not None
    name = name_of(args, config.roots)
    if args.processes:
        return _processes(args, name, config)
    if asyncio.run(_start(args.redis, name, config)) == "finished":
        return _finished(args.redis, name)
    return _engine(args, args.redis, name, config)


def _own_secrets(args: argparse.Namespace) -> dict[str, object]:
    """Issue 21: what a joining process brings itself: header values, proxy, cookies.
    Everything else (--header-host, the header names, the proxy's host) is the crawl's."""
    given = session_options(args)
    out = {k: given[k] for k in ("cookies", "save_cookies") if k in given}
    if args.header:
        out["headers"] = given["headers"]
    if args.proxy:
        out["proxy"] = given["proxy"]
    if args.no_proxy:
        out["env_proxy"] = False
    return out


def secret_argv(config: CrawlConfig, i: int) -> list[str]:
    """The secrets of a --processes child, on the argv of a fork (never exec'd, so never
    in the process list): the parent's own, as given."""
    out = [a for h in config.headers for a in ("--header", h)]
    if config.proxy:
        out += ["--proxy", config.proxy]
    if not config.env_proxy:
        out.append("--no-proxy")
    if config.cookies:
        out += ["--cookies", config.cookies]
    if config.save_cookies:
        out += ["--save-cookies", f"{config.save_cookies}.p{i}"]
    return out


def _finished(url: str, name: str) -> int:
    print(f"crawl {name!r} has already finished: export it with "
          f"crawltop export --redis {url} {name} --jsonl FILE", file=sys.stderr)
    return 0


async def _start(url: str, name: str, config: CrawlConfig) -> str:
    r = cluster.client(url)
    try:
        return (await cluster.start(r, url, name, config))[1]
    finally:
        await r.aclose()


async def _join(url: str, name: str, *, resume: bool = True, old_ok: bool = False) -> tuple[CrawlConfig, str]:
    r = cluster.client(url)
    try:
        return await cluster.join(r, url, name, resume=resume, old_ok=old_ok)
    finally:
        await r.aclose()


def _engine(args: argparse.Namespace, url: str, name: str, config: CrawlConfig) -> int:
    """This process as one engine of crawl NAME, with its TUI (the whole crawl's numbers,
    its processes panel) or headless."""
    frontier = cluster.frontier(url, name, config)
    crawler = Crawler(config, frontier=frontier, sinks=[frontier.sink, *extra_sinks(args)])
    reports = not getattr(args, "no_final_report", False)
    member = Member(crawler, frontier, reports=reports)
    args.socket_base, args.name = name, None  # sockets NAME, NAME-2, ...: one per process here
    if args.headless or not sys.stdout.isatty():
        code = run_crawler(member, args)  # type: ignore[arg-type]
    else:  # the TUI shows the whole crawl; the socket (ctl, attach) stays this process's own
        from ..tui.app import run_tui
        from .headless import report

        local = listen(member, args)
        local.control.mode = "tui"
        code = run_tui(ClusterView(frontier.redis, name, list(crawler.roots), local=local, lease=frontier.lease),
                       exit_on_finish=args.exit_on_finish,
                       hangup=hangup.Hangup(getattr(args, "on_hangup", "detach"), local.control))
        report(member, sys.stdout)  # type: ignore[arg-type]
    records = crawler.stats.records
    print(f"  redis: {frontier.round_trips} round trips for {records} records "
          f"({frontier.round_trips / max(1, records):.2f} per record, heartbeats included)", file=sys.stdout)
    if not member.left:
        print(f"crawltop: Redis unreachable at exit: the URLs this process held go back on the "
              f"queue when their leases run out ({frontier.lease:g} s)", file=sys.stderr)
    if member.reporter and reports:
        print(f"crawl {name!r} finished; this was its last process: the whole crawl's report follows. "
              f"Records: crawltop export --redis {url} {name} --jsonl FILE", file=sys.stderr)
        _final_report(url, name)
    return code


def _final_report(url: str, name: str) -> None:
    """The last process out writes the report of the whole crawl (`crawltop report`'s)."""
    from ..core.report import analyse
    from ..core.report_format import FORMATS
    from .report import shared_records

    try:
        sys.stdout.write(FORMATS["text"](analyse(shared_records(url, name), source=f"crawl {name} on Redis")))
    except Exception as exc:  # the crawl is done and its records are safe in Redis: say why, no traceback
        print(f"crawltop: the final report could not be written: {clean(exc)}", file=sys.stderr)


def _processes(args: argparse.Namespace, name: str, config: CrawlConfig) -> int:
    """N `join` children and this process watching them; a private Redis if none given."""
    server = None
    url = args.redis
    if url is None:
        server = RedisServer.start(state_dir() / "redis" / name)
        url = server.url
    try:
        asyncio.run(_start(url, name, config))
        logs = state_dir() / "log"
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        children = [_child(url, name, config.concurrency, logs / f"{name}.p{i}.log", args.output, i,
                           secret_argv(config, i))
                    for i in range(1, args.processes + 1)]
        hup = hangup.Hangup(getattr(args, "on_hangup", "detach"), None, name=name)
        if not args.headless and sys.stdout.isatty():
            # q stops the crawl; d leaves it to us; a hang-up too (its log: NAME.log), or stops it
            _monitor(url, name, exit_on_finish=args.exit_on_finish, on_hangup=hup)
        return _watch(url, name, children, hup=hup.reason is None, stop_now=hup.reason is not None and hup.stop)
    finally:
        if server is not None:
            server.stop()


class Forked:
    """An engine forked from this process, with the part of Popen's interface _watch
    uses. A fork starts crawling at once: its imports (0.4 s of CPU) are already done."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


def _child(url: str, name: str, concurrency: int, log: Path, output: str | None, i: int,
           secrets: Sequence[str] = ()) -> Forked:
    """`crawltop join NAME` in a forked child: its own session, its log on stdout and
    stderr, SIGTERM when this process dies; it never returns into our stack."""
    argv = ["join", name, "--redis", url, "--headless", "-c", str(concurrency), "--no-final-report",
            *(["-o", f"{output}.p{i}"] if output else []), *secrets]
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    # no signal between fork and setsid: a Ctrl-C there would unwind the child into our
    # stack (and stop the private redis-server of the others)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return Forked(pid)
    code = 1
    try:
        os.setsid()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        die_with_parent()
        if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
            os._exit(1)
        null, fd = os.open(os.devnull, os.O_RDONLY), os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        from .main import main

        code = main(argv)
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into the parent's code
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _watch(url: str, name: str, children: list[Forked], *, hup: bool = True, stop_now: bool = False) -> int:
    """Progress of the whole crawl on stderr until every child is gone; Ctrl-C stops the
    whole crawl (through Redis), and the children finish cleanly."""
    keys = Keys(name)
    r = redis.Redis.from_url(url, socket_timeout=5)
    stopping = stop_now  # (--on-hangup stop after the monitor's terminal went away)

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    # SIGHUP stops the crawl, unless the terminal already went away and left it running
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hup else []))}
    started, sent, shown = time.monotonic(), False, 0.0
    try:
        while any(c.poll() is None for c in children):
            if stopping and not sent:
                r.hset(keys.ctl, "stop", "1")
                r.hset(keys.meta, "status", "stopped")
                sent = True
            time.sleep(0.1)
            if time.monotonic() - shown < PROGRESS_EVERY:
                continue
            shown = time.monotonic()
            try:
                records = int(r.hget(keys.count, "records") or 0)
                print(f"[{time.monotonic() - started:7.1f}s] {name}: records {records} queued {int(r.hget(keys.count, 'queued') or 0)} "
                      f"in flight {r.zcard(keys.leases)} processes {r.hlen(keys.procs)}", file=sys.stderr, flush=True)
            except redis.RedisError as exc:
                print(f"crawltop: Redis: {clean(exc)}", file=sys.stderr, flush=True)
        status = (r.hget(keys.meta, "status") or b"?").decode()
        records = int(r.hget(keys.count, "records") or 0)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        r.close()
    codes = [c.wait() for c in children]
    print(f"crawl {name!r} {status}: {records} records from {len(children)} processes "
          f"(exit codes {', '.join(map(str, codes))})", file=sys.stdout)
    if status == "finished" and _claim_report(url, name):
        _final_report(url, name)
    return 0 if all(c == 0 for c in codes) else 1


def _claim_report(url: str, name: str) -> bool:
    """The whole crawl's report is written once: by us, unless a process that joined from
    elsewhere left after our engines and claimed it (then it says who)."""
    r = redis.Redis.from_url(url, socket_timeout=5)
    try:
        me = f"processes:{socket.gethostname()}:{os.getpid()}"
        meta = Keys(name).meta
        if r.hsetnx(meta, "reporter", me) or r.hget(meta, "reporter") == me.encode():
            return True
        print(f"crawl {name!r}: its report was written by {clean((r.hget(meta, 'reporter') or b'?').decode())}",
              file=sys.stderr)
        return False
    except redis.RedisError as exc:
        print(f"crawltop: Redis: {clean(exc)}", file=sys.stderr)
        return False
    finally:
        r.close()


def check_crawl(url: str, name: str | None) -> str:
    """NAME, once Redis is reachable and holds that crawl; else a one-line UsageError."""
    if not name:
        raise UsageError("with --redis, name the crawl: NAME")
    name = check_name(name)
    asyncio.run(_join(url, name, resume=False))
    return name


def monitor(url: str, name: str | None) -> int:
    """`crawltop attach NAME --redis URL`: the whole crawl, from any machine."""
    name = check_crawl(url, name)
    code = _monitor(url, name)
    try:
        status = (redis.Redis.from_url(url, socket_timeout=5).hget(Keys(name).meta, "status") or b"?").decode()
    except redis.RedisError:
        status = "Redis unreachable"
    print(f"crawltop: left the monitor of {name!r} (status: {status})", file=sys.stderr)
    return code


def _monitor(url: str, name: str, *, exit_on_finish: bool = False, on_hangup: hangup.Hangup | None = None) -> int:
    from ..tui.app import CrawlApp

    async def run() -> int:
        r = cluster.client(url)
        roots = json.loads(await r.hget(Keys(name).meta, "roots") or b"[]")
        view = ClusterView(r, name, roots)
        app = CrawlApp(view, exit_on_finish=exit_on_finish, hangup=on_hangup)
        try:
            await app.run_async()
        finally:
            await r.aclose()
        return app.return_code or 0

    return asyncio.run(run())


def ctl(args: argparse.Namespace) -> int:
    """`crawltop ctl NAME --redis URL ACTION [--process PROC]`: exit 0, or 1 with a reason."""
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
            if args.process and args.process not in {p.decode() for p in await r.hkeys(Keys(name).procs)}:
                print(f"crawltop: no process {args.process!r} in crawl {name!r}", file=sys.stderr)
                return 1
            if op is not None:
                await commands.command(r, Keys(name), op, int(args.value[0]) if op == "concurrency" else None,
                                       args.process)
            await view.read()
            snap = view.stats.snap
            print(json.dumps({"name": name, "status": view.status, "state": snap.state, "records": view.records,
                              "pages": snap.pages, "queued": snap.queued, "seen": snap.seen,
                              "in_flight": snap.in_flight, "processes": [
                                  {"proc": p.proc, **dataclasses.asdict(p.info), "lost": p.lost, "leases": p.leases,
                                   "heartbeat_age": round(p.beat_age, 1)} for p in view.processes()]}))
            return 0
        finally:
            await r.aclose()

    return asyncio.run(run())


def export(args: argparse.Namespace) -> int:
    """`crawltop export --redis URL NAME --jsonl F|--csv F [--trim]`."""
    name = check_name(args.state)
    r = redis.Redis.from_url(args.redis, socket_timeout=30)
    try:
        # reachable, ours, exists (an older format's records export too): or a one-line error
        asyncio.run(_join(args.redis, name, resume=False, old_ok=True))
        streams = []
        for out, fn, kind in ((args.jsonl, export_jsonl, "JSONL"), (args.csv, export_csv, "CSV")):
            if out:
                streams.append(StreamRecords(r, name))
                n = fn(streams[-1], out)
                print(f"exported {n} records of {name!r} to {out} ({kind})", file=sys.stderr)
        if args.trim and streams:  # up to what every file has (the first read the fewest)
            print(f"trimmed {streams[0].trim()} exported records from Redis", file=sys.stderr)
        return 0
    except redis.RedisError as exc:
        raise UsageError(f"Redis at {args.redis}: {exc}") from None
    finally:
        r.close()
