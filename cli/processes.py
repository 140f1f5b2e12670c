"""`crawl --processes N`: N engine processes forked here, each a `join` child, and this
process watching them, against `--redis` or a private redis-server on a Unix socket in
the state directory, stopped at the end."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import redis

from ..core.cluster.connect import sync_client
from ..core.cluster.keys import Keys, text
from ..core.cluster.oneshot import start
from ..core.cluster.server import RedisServer, die_with_parent
from ..core.cluster.totals import read_parts_sync, totals_sync
from ..core.config import CrawlConfig
from ..core.monitor.sanitize import clean
from ..core.sockets.rundir import state_dir
from . import hangup
from .archive import archive_argv
from .engine import shown_url, whole_report, write_report
from .gather import Gather
from .monitor import run_monitor

PROGRESS_EVERY = 2.0
ORPHAN_GRACE = 5.0  # an engine whose parent died has this long to stop cleanly, then exits
STOP_GRACE = 20.0  # after Ctrl-C, engines still running this long are sent SIGTERM, then SIGKILL
KILL_AFTER = 5.0  # and SIGKILL this long after the SIGTERM

Main = Callable[[Sequence[str]], int]  # `crawltop join ...` in a child: its argv, its exit code


def supervise(args: argparse.Namespace, name: str, config: CrawlConfig, join: Main) -> int:
    """N `join` children and this process watching them; a private Redis if none given."""
    server = None
    url = args.redis
    if url is None:
        server = RedisServer.start(state_dir() / "redis" / name)
        url = server.url
    try:
        asyncio.run(start(url, name, config, expect_urls=getattr(args, "expect_urls", None),
                          partitions=getattr(args, "partitions", None)))
        logs = state_dir() / "log"
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        children = [child(join, url, name, config.concurrency, logs / f"{name}.p{i}.log", args.output, i,
                          [*secret_argv(config, i), *archive_argv(args)])
                    for i in range(1, args.processes + 1)]
        hup = hangup.Hangup(getattr(args, "on_hangup", "detach"), None, name=name)
        if not args.headless and sys.stdout.isatty():
            # q stops the crawl; d leaves it to us; a hang-up too (its log: NAME.log), or stops it
            run_monitor(url, name, exit_on_finish=args.exit_on_finish, on_hangup=hup)
        gather = Gather(url, name, args.output)
        try:
            code = watch(url, name, children, hup=hup.reason is None, stop_now=hup.reason is not None and hup.stop,
                         redis_alive=(lambda: server.proc.poll() is None) if server is not None else None,
                         gather=gather, keep=shown_url(url) if server is None else None)
            if args.output:
                gather.write_output([f"{args.output}.p{i}" for i in range(1, args.processes + 1)], one_output)
        finally:
            gather.close()
        return code
    finally:
        if server is not None:
            server.stop()


def one_output(url: str, name: str, output: str, parts: Sequence[str]) -> None:
    """`-o FILE` gives FILE: while the crawl runs each engine streams its own
    records to FILE.pN; at the end FILE is written from the crawl's record stream in Redis,
    where each URL has exactly one record (a URL re-fetched after its process died counts
    once), then the per-process files go. If Redis cannot be read, FILE is the parts one
    after the other and they stay, and stderr says so."""
    from ..core.cluster.records import StreamRecords
    from ..core.storage.export import export_jsonl

    tmp = f"{output}.tmp"
    r = sync_client(url, socket_timeout=30)
    try:
        n = export_jsonl(StreamRecords(r, name), tmp)
        os.replace(tmp, output)
    except (redis.RedisError, OSError, ValueError, LookupError) as exc:  # (ValueError, LookupError: not a record)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        with open(output, "wb") as out:
            for part in parts:
                with contextlib.suppress(FileNotFoundError), open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        print(f"crawltop: {output}: the per-process files one after the other (Redis: {clean(exc)}); "
              f"they stay: {', '.join(parts)}", file=sys.stderr)
        return
    finally:
        r.close()
    for part in parts:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
    print(f"crawltop: {n:,} records in {output}", file=sys.stderr)


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


class Forked:
    """An engine forked from this process, with the part of Popen's interface watch()
    uses. A fork starts crawling at once: its imports (0.4 s of CPU) are already done."""

    def __init__(self, pid: int, log: Path | None = None, start: int = 0) -> None:
        self.pid = pid
        self.log, self.start = log, start  # its log, and where this run's part of it begins
        self.returncode: int | None = None
        self.signalled: int | None = None  # the last signal escalate() sent
        self.fd = -1  # a pidfd, readable once the engine has exited (nap); -1 without one
        with contextlib.suppress(AttributeError, OSError):  # Linux 5.3+
            self.fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._ended(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._ended(os.waitpid(self.pid, 0)[1])
        assert self.returncode is not None
        return self.returncode

    def _ended(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def nap(children: Sequence[Forked], seconds: float) -> None:
    """time.sleep(seconds), cut short when an engine exits: the parent used to notice the
    crawl's end up to 0.1 s late (docs/benchmarks/redis.md, "Syscalls off the hot path")."""
    fds = [c.fd for c in children if c.poll() is None and c.fd >= 0]
    if not fds:
        time.sleep(seconds)
        return
    waiting = select.poll()  # (select.select refuses fds past 1024)
    for fd in fds:
        waiting.register(fd, select.POLLIN)
    waiting.poll(seconds * 1000)


def child(join: Main, url: str, name: str, concurrency: int, log: Path, output: str | None, i: int,
          secrets: Sequence[str] = ()) -> Forked:
    """`crawltop join NAME` in a forked child: its own session, its log on stdout and
    stderr, SIGTERM when this process dies; it never returns into our stack."""
    argv = ["join", name, "--redis", url, "--headless", "-c", str(concurrency), "--no-final-report",
            *(["-o", f"{output}.p{i}"] if output else []), *secrets]
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    start = log.stat().st_size if log.exists() else 0  # (appended to: a crawl run again adds to it)
    # no signal between fork and setsid: a Ctrl-C there would unwind the child into our
    # stack (and stop the private redis-server of the others)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return Forked(pid, log, start)
    code = 1
    try:
        os.setsid()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        die_with_parent()
        if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
            os._exit(1)
        exit_with_parent(parent)
        null, fd = os.open(os.devnull, os.O_RDONLY), os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = join(argv)
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


def exit_with_parent(parent: int, grace: float = ORPHAN_GRACE) -> None:
    """A thread of an engine child: once its parent is gone (SIGKILL included: PDEATHSIG
    has already asked the engine to stop), the engine gets `grace` seconds to finish, then
    the process exits whatever it waits on (seen: an orphan engine lived on for 14
    minutes, its private Redis gone, retrying). Its JSON lines are flushed every 0.2 s."""
    import threading

    def watchdog() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        time.sleep(grace)
        with contextlib.suppress(Exception):
            print("crawltop: the parent process is gone; this engine exits", file=sys.stderr, flush=True)
        os._exit(1)

    threading.Thread(target=watchdog, name="exit-with-parent", daemon=True).start()


def stop_grace() -> float:
    """STOP_GRACE, or CRAWLTOP_STOP_GRACE=SECONDS (the tests stop an engine on purpose)."""
    try:
        grace = float(os.environ.get("CRAWLTOP_STOP_GRACE") or STOP_GRACE)
    except ValueError:
        return STOP_GRACE
    return grace if math.isfinite(grace) and grace >= 0 else STOP_GRACE  # nan would never escalate


def watch(url: str, name: str, children: list[Forked], *, hup: bool = True, stop_now: bool = False,
          redis_alive: Callable[[], bool] | None = None, gather: Gather | None = None,
          keep: str | None = None) -> int:
    """Progress of the whole crawl on stderr until every child is gone; Ctrl-C stops the
    whole crawl (through Redis), and the children finish cleanly. If the private
    redis-server dies (`redis_alive`), the crawl is gone with it: the engines are told to
    stop at once (SIGTERM, then SIGKILL), rather than retry it forever. `gather` reads the
    crawl's records meanwhile, for its report and -o FILE (cli/gather.py). `keep`: the
    Redis URL to print when the crawl's Redis stays (a stop keeps its queue for a join);
    None: a private one, stopped at the end, so the URLs left are cancelled."""
    keys = Keys(name)
    r = sync_client(url, socket_timeout=5)
    stopping = stop_now  # (--on-hangup stop after the monitor's terminal went away)
    grace = stop_grace()

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    # SIGHUP stops the crawl, unless the terminal already went away and left it running
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hup else []))}
    started, sent, shown = time.monotonic(), 0.0, 0.0
    status, records = "?", 0
    parts: list[Keys] | None = None  # the crawl's partitions (core/cluster/totals.py), read once
    try:
        while any(c.poll() is None for c in children):
            if stopping and not sent:
                with contextlib.suppress(redis.RedisError):
                    r.hset(keys.ctl, "stop", "1")
                    r.hset(keys.meta, "status", "stopped")
                sent = time.monotonic()
            if redis_alive is not None and not redis_alive() and not stopping:
                print(f"crawltop: the private redis-server of {name!r} is gone: stopping its engines",
                      file=sys.stderr, flush=True)
                stopping, sent = True, time.monotonic() - grace  # nothing to tell through Redis
            if sent:
                escalate(children, time.monotonic() - sent, grace)
            nap(children, 0.1)
            if gather is not None:
                gather.step()
            if time.monotonic() - shown < PROGRESS_EVERY:
                continue
            shown = time.monotonic()
            try:
                parts = parts if parts is not None else read_parts_sync(r, name)
                counts = totals_sync(r, name, parts)
                records = counts["records"]
                print(f"[{time.monotonic() - started:7.1f}s] {name}: records {records:,} "
                      f"queued {counts['queued']:,} in flight {counts['leased']:,} "
                      f"processes {r.hlen(keys.procs)}", file=sys.stderr, flush=True)
            except redis.RedisError as exc:
                print(f"crawltop: Redis: {clean(exc)}", file=sys.stderr, flush=True)
        with contextlib.suppress(redis.RedisError):
            status = text(r.hget(keys.meta, "status") or b"?")
            records = totals_sync(r, name, parts)["records"]
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        r.close()
    codes = [c.wait() for c in children]
    for i, c in enumerate(children, 1):
        if c.returncode:
            failed(i, c)
    if gather is not None:
        gather.finish()
    print(f"crawl {name!r} {status}: {records:,} records from {len(children)} processes "
          f"(exit codes {', '.join(map(str, codes))})", file=sys.stdout)
    # the whole crawl's report, as one process prints its own: at the end, and after Ctrl-C
    # (a stopped crawl's is not claimed: the process that finishes it later reports it again)
    if status == "stopped" or (status == "finished" and claim_report(url, name)):
        totals = gather.totals() if gather is not None else None
        write_report(lambda: whole_report(url, name, totals=totals, wall=time.monotonic() - started, keep=keep))
    return 0 if all(c == 0 for c in codes) else 1


def failed(i: int, c: Forked, lines: int = 6) -> None:
    """An engine that exited with an error says so on stderr, with the end of what it wrote
    to its log in this run (its own stderr went there): the cause, without opening the file."""
    tail: list[str] = []
    if c.log is not None:
        with contextlib.suppress(OSError), open(c.log, "rb") as fh:
            at = max(c.start, os.fstat(fh.fileno()).st_size - 8192)
            fh.seek(at)
            text = fh.read().decode(errors="replace").splitlines()
            tail = [clean(x, 300) for x in text[1 if at > c.start else 0:][-lines:]]  # (no cut first line)
    where = "" if c.log is None else f"; its log, {c.log}, " + ("ends:" if tail else "is empty")
    print(f"crawltop: process {i} exited with code {c.returncode}{where}", file=sys.stderr, flush=True)
    for line in tail:
        print(f"  {line}", file=sys.stderr, flush=True)


def escalate(children: list[Forked], since_stop: float, grace: float = STOP_GRACE) -> None:
    """Engines that have not stopped `grace` seconds after the stop get SIGTERM (their
    clean stop again, or their way out), and SIGKILL 5 s later: Ctrl-C always ends."""
    sig = signal.SIGKILL if since_stop > grace + KILL_AFTER else signal.SIGTERM if since_stop > grace else None
    if sig is None:
        return
    for c in children:
        if c.poll() is None and c.signalled != sig:
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.pid, sig)
            c.signalled = sig


def claim_report(url: str, name: str) -> bool:
    """The whole crawl's report is written once: by us, unless a process that joined from
    elsewhere left after our engines and claimed it (then it says who)."""
    r = sync_client(url, socket_timeout=5)
    try:
        me = f"processes:{socket.gethostname()}:{os.getpid()}"
        meta = Keys(name).meta
        if r.hsetnx(meta, "reporter", me) or r.hget(meta, "reporter") == me.encode():
            return True
        print(f"crawl {name!r}: its report was written by {clean(text(r.hget(meta, 'reporter') or b'?'))}",
              file=sys.stderr)
        return False
    except redis.RedisError as exc:
        print(f"crawltop: Redis: {clean(exc)}", file=sys.stderr)
        return False
    finally:
        r.close()
