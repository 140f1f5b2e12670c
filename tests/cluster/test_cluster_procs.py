"""A shared crawl's real processes, each a `crawltop` child: politeness across two of
them counted at the server, `join --detach`, a Unix-socket Redis URL, `--processes`
with a given Redis, control of one process, and `join`'s one-line refusals."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from support.cluster import CLI, recorded_by, records_of, run, start
from support.sites import counting_site
from support.wait import wait_for

from crawltop.core.cluster.keys import Keys

pytestmark = pytest.mark.timeout(120)


def finish(procs: list[subprocess.Popen[str]], timeout: float = 90) -> list[tuple[str, str]]:
    outs = [p.communicate(timeout=timeout) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), [err[-1500:] for _out, err in outs]
    return outs


def exported(url: str, name: str, path: Path) -> list[dict]:
    done = run("export", "--redis", url, name, "--jsonl", str(path))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- politeness: one host, two OS processes, what the server saw -----------------------------

DELAY = 0.2
# each process sleeps until its reserved start on its own clock, and the server stamps a
# request when its handler runs: scheduling jitter on a loaded 2-core CI. Without the
# shared gate the gaps fall to 0.04 s and less, well under DELAY - TOLERANCE.
TOLERANCE = 0.08


@pytest.mark.parametrize("case", ["delay", "crawl-delay", "per-host"])
def test_politeness_holds_across_two_processes(case, redis_url, rundir):
    """`crawl --redis` and `join`, 3 workers each, one host. --delay (or robots.txt's
    Crawl-delay, robots on): consecutive requests from both processes together are at
    least the delay apart (one process's own delay alone would let the two interleave at
    half of it), and the whole crawl takes at least (n-1) delays. --per-host 2 on slow
    pages: the server never serves more than 2 at once (each process alone would allow 2,
    so 4 together) and does serve 2. Both processes fetch part of the site."""
    name = f"pol-{case}"
    opts = {"delay": ["--delay", str(DELAY), "--no-robots"], "crawl-delay": [],
            "per-host": ["--per-host", "2", "--no-robots"]}[case]
    pages, page_delay = (30, 0.0) if case != "per-host" else (60, 0.1)
    robots = f"User-agent: *\nCrawl-delay: {DELAY}\n" if case == "crawl-delay" else None
    with counting_site(pages, page_delay, robots=robots) as site_:
        common = ["--redis", redis_url, "--headless", "-c", "3"]
        first = start("crawl", site_.url, "--name", name, "--no-sitemaps", *opts, *common)
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: r.exists(Keys(name).meta) or first.poll() is not None, what="the crawl in Redis")
        # held until the second process is in: on a loaded machine its start can take longer
        # than the whole crawl, and then only one process would have taken part
        paused = run("ctl", name, "--redis", redis_url, "pause")
        assert paused.returncode == 0, paused.stderr
        second = start("join", name, *common)
        wait_for(lambda: r.hlen(Keys(name).procs) == 2 or second.poll() is not None, what="the second process")
        resumed = run("ctl", name, "--redis", redis_url, "resume")
        assert resumed.returncode == 0, resumed.stderr
        finish([first, second])
        stats = site_.stats()
    by = recorded_by(r, name)
    assert len(by) == 2 and sum(by.values()) == pages, by  # both took part; every page once
    assert set(stats["hits"]) - {"/robots.txt"} == {"/", *(f"/p/{i}" for i in range(1, pages))}
    assert {n for p, n in stats["hits"].items() if p != "/robots.txt"} == {1}
    if case == "per-host":
        assert stats["max_in_flight"] == 2, stats["max_in_flight"]
        return
    # robots.txt is read once per process, before the gate: not a page request
    starts = sorted(t for path, t, _end in stats["log"] if path != "/robots.txt")
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) == pages
    # The server stamps a request when its handler runs: on a loaded machine one late stamp
    # shortens one gap and lengthens the next, so single gaps can't be held to the delay.
    # The median gap and the whole span can (each process's own gate alone gives a median
    # near 0 and half the span); the Lua's arithmetic is exact in test_cluster_policy.py.
    assert statistics.median(gaps) >= DELAY - TOLERANCE, sorted(gaps)
    assert sum(g < DELAY / 2 for g in gaps) <= len(gaps) // 10, sorted(gaps)[:5]
    assert starts[-1] - starts[0] >= (pages - 1) * DELAY - TOLERANCE, starts[-1] - starts[0]


# -- join --detach -----------------------------------------------------------------------------

# Runs a command as a child subreaper (Linux): a process it detaches is re-parented to us
# when its parent exits, so we can wait for it and learn its exit code.
REAPER = r"""
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
p = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True, text=True)
print(json.dumps([p.returncode, p.stdout, p.stderr]), flush=True)
codes = {}
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    codes[pid] = os.waitstatus_to_exitcode(status)
print(json.dumps(codes), flush=True)
"""


def test_join_detach_runs_and_finishes(redis_url, rundir, tmp_path):
    """`join NAME --detach` prints the joined engine's socket name and exits 0 at once; the
    engine runs in the background, takes part in the crawl, writes its log under the state
    directory, and exits 0 when Redis says the crawl is finished."""
    pages, k = 600, Keys("dj")
    with counting_site(pages, 0.02) as site_:
        first = start("crawl", site_.url, "--redis", redis_url, "--name", "dj", "--headless", "-c", "2",
                      "--no-sitemaps", "--no-robots")
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: records_of(r, "dj") >= 5, what="the first process's records")
        reaper = subprocess.Popen([sys.executable, "-c", REAPER, *CLI, "join", "dj", "--redis", redis_url,
                                   "--detach", "-c", "2"], stdout=subprocess.PIPE, text=True)
        rc, out, err = json.loads(reaper.stdout.readline())  # type: ignore[union-attr]
        assert rc == 0 and err == "", (rc, out, err)
        sock = out.strip()
        assert sock.startswith("dj") and sock != "dj", out  # "dj" is the first process's socket
        assert records_of(r, "dj") < pages  # it returned while the crawl still runs
        wait_for(lambda: r.hlen(k.procs) == 2, what="the detached engine registered")
        detached = {json.loads(v)["pid"] for v in r.hvals(k.procs)} - {first.pid}
        assert len(detached) == 1, detached
        (out_first, err_first), = finish([first])
        log_path = rundir.parent / "state" / "crawltop" / "log" / f"{sock}.log"
        try:
            rest, _ = reaper.communicate(timeout=60)  # the reaper waits for the detached engine
        except subprocess.TimeoutExpired as err:
            reaper.kill()
            raise AssertionError(f"the detached engine did not end: status {r.hget(k.meta, 'status')!r}, "
                                 f"processes {r.hkeys(k.procs)!r}, its log: {log_path.read_text()[-3000:]}") from err
        codes = json.loads(rest)
        assert reaper.returncode == 0
    assert {int(pid): code for pid, code in codes.items()} == {detached.pop(): 0}
    assert r.hget(k.meta, "status") == b"finished" and r.hlen(k.procs) == 0
    by = recorded_by(r, "dj")
    assert len(by) == 2 and all(n > 0 for n in by.values()), by
    log = log_path.read_text()
    assert "crawltop report:" in log and "round trips for" in log and "Traceback" not in log, log[-2000:]
    # exactly one of the two was the last one out and wrote the whole crawl's report
    assert ("this was its last process" in log) != ("this was its last process" in err_first)
    recs = exported(redis_url, "dj", tmp_path / "dj.jsonl")
    urls = [x["url"] for x in recs]
    assert len(urls) == len(set(urls)) == pages


# -- a Unix-socket Redis URL -----------------------------------------------------------------

def test_unix_socket_redis_url(redis_unix_server, rundir, tmp_path):
    """`--redis unix:///PATH` for crawl, join, ctl and export: the crawl lives in that server."""
    url = redis_unix_server.url
    assert url.startswith("unix:///") and url.endswith(".sock")
    pages = 200
    with counting_site(pages, 0.01) as site_:
        common = ["--redis", url, "--headless", "-c", "2"]
        first = start("crawl", site_.url, "--name", "u", "--no-sitemaps", "--no-robots", *common)
        r = redis.Redis.from_url(url)
        wait_for(lambda: records_of(r, "u") >= 5, what="the first process's records")
        second = start("join", "u", *common)
        finish([first, second])
    status = run("ctl", "u", "--redis", url, "status")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["records"] == pages and json.loads(status.stdout)["status"] == "finished"
    assert len(recorded_by(r, "u")) == 2
    urls = [x["url"] for x in exported(url, "u", tmp_path / "u.jsonl")]
    assert len(urls) == len(set(urls)) == pages


# -- --processes N with --redis URL --------------------------------------------------------------

def test_processes_with_a_given_redis(redis_url, rundir):
    """`crawl --processes 2 --redis URL`: both engines work on that server's crawl; no
    private redis-server is started."""
    pages = 300
    with counting_site(pages, 0.01) as site_:
        done = subprocess.run([*CLI, "crawl", site_.url, "--processes", "2", "--redis", redis_url, "--headless",
                               "-c", "3", "--name", "pg", "--no-sitemaps", "--no-robots"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
        hits = site_.stats()["hits"]
    assert done.returncode == 0, done.stderr
    assert f"crawl 'pg' finished: {pages} records from 2 processes (exit codes 0, 0)" in done.stdout
    assert f"  crawl 'pg' on Redis, 2 processes\n  records {pages:,}  pages {pages:,}  " in done.stdout
    r = redis.Redis.from_url(redis_url)
    assert r.hget(Keys("pg").meta, "status") == b"finished" and records_of(r, "pg") == pages
    by = recorded_by(r, "pg")
    assert len(by) == 2 and all(n > 0 for n in by.values()), by
    assert set(hits.values()) == {1} and len(hits) == pages
    assert not (rundir.parent / "state" / "crawltop" / "redis").exists()  # no private server's directory


def test_processes_with_a_record_that_is_not_one_still_write_file_and_say_why(redis_url, rundir, tmp_path):
    """A record that is not JSON, put in the crawl's stream by hand while it runs: the
    parent's reading gives up on it and the end does it the old way, which says why in one
    line each: no traceback, FILE made of the engines' own files, the exit code theirs."""
    out = tmp_path / "all.jsonl"
    r = redis.Redis.from_url(redis_url)
    pages = 60
    with counting_site(pages, 0.1) as site_:
        proc = start("crawl", site_.url, "--processes", "2", "--redis", redis_url, "--headless", "-c", "3",
                     "--name", "bad", "--no-sitemaps", "--no-robots", "-o", str(out))
        wait_for(lambda: r.xlen(Keys("bad").rec) > 0, what="a first record")
        r.xadd(Keys("bad").rec, {"url": "http://x.invalid/", "data": "not json", "new": 0, "proc": "p0"})
        stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert "crawltop: the final report could not be written" in stderr
    assert f"{out}: the per-process files one after the other" in stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert len(urls) == len(set(urls)) == pages
    assert not (tmp_path / "all.jsonl.tmp").exists()
    r.close()


# -- ctl concurrency, one process and the whole crawl ---------------------------------------------

def test_ctl_concurrency_of_one_process(site, redis_url, rundir):
    """`ctl NAME --redis URL concurrency 5 --process P` changes P's workers only (and P
    really runs 5 at once); a whole-crawl `concurrency 3` then changes the other process,
    while P's own setting wins over it. (Polled from the rows each heartbeat writes.)"""
    k = Keys("cc")
    r = redis.Redis.from_url(redis_url)

    def ctl(*args: str) -> dict:
        done = run("ctl", "cc", "--redis", redis_url, *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def procs() -> dict[str, dict]:
        return {p.decode(): json.loads(v) for p, v in r.hgetall(k.procs).items()}

    def beat(proc: str) -> int:  # its last heartbeat, ms on the server's clock
        return int(r.hget(k.beats, proc) or 0)

    def now_ms() -> int:
        sec, usec = r.time()
        return sec * 1000 + usec // 1000

    a = start("crawl", site, "--redis", redis_url, "--name", "cc", "--headless", "-c", "2", "--no-sitemaps")
    wait_for(lambda: r.hlen(k.procs) == 1 or a.poll() is not None, what="the first process")
    b = start("join", "cc", "--redis", redis_url, "--headless", "-c", "2")
    wait_for(lambda: len(procs()) == 2 and all(p["workers"] == 2 for p in procs().values()), what="two processes")
    one, other = sorted(procs())
    t = now_ms()
    ctl("concurrency", "5", "--process", one)
    wait_for(lambda: procs()[one]["workers"] == 5, what="concurrency 5 in that process")
    wait_for(lambda: procs()[one]["busy"] == 5, what="five workers fetching")
    wait_for(lambda: beat(other) > t, what="a heartbeat of the other process")
    assert procs()[other]["workers"] == 2
    t = now_ms()
    ctl("concurrency", "3")
    wait_for(lambda: procs()[other]["workers"] == 3, what="concurrency 3 in the other process")
    wait_for(lambda: beat(one) > t, what="a heartbeat of the first process")
    assert procs()[one]["workers"] == 5  # its own setting wins over the whole crawl's
    r.hset(k.ctl, "stop", "1")  # as `ctl stop` does (tested in test_cluster_cli.py), without its start-up
    r.hset(k.meta, "status", "stopped")
    finish([a, b], timeout=60)


# -- join's refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["no-such-crawl", "no-such-crawl-detached", "unreachable", "bad-url"])
def test_join_bad_input_one_line_exit_2(case, redis_url, rundir):
    url = {"unreachable": "redis://127.0.0.1:9/0", "bad-url": "redis://127.0.0.1:notaport/0"}.get(case, redis_url)
    args = ["join", "nobody", "--redis", url, "--headless"] + (["--detach"] if case.endswith("detached") else [])
    proc = run(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawltop: error: "), proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    expect = {"no-such-crawl": "no crawl named 'nobody'", "no-such-crawl-detached": "no crawl named 'nobody'",
              "unreachable": "cannot reach Redis", "bad-url": "--redis URL"}
    assert expect[case] in lines[0]
    if case.startswith("no-such"):
        assert redis.Redis.from_url(redis_url).keys("crawltop:*") == []  # nothing created by a failed join


def test_last_survivor_writes_the_report_when_a_killed_process_held_nothing(redis_url, rundir):
    """A process killed with no lease still looks live for a few seconds (its last beat is
    fresh): the survivor that finishes the crawl just after waits for it to go quiet,
    then claims and writes the whole crawl's report (was: nobody wrote it)."""
    k, pages = Keys("lr"), 300
    with counting_site(pages, 0.05) as site_:
        a = start("crawl", site_.url, "--redis", redis_url, "--name", "lr", "--headless", "-c", "2",
                  "--no-sitemaps", "--no-robots")
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: r.exists(k.meta), what="the crawl in Redis")
        b = start("join", "lr", "--redis", redis_url, "--headless", "-c", "2")
        wait_for(lambda: r.hlen(k.procs) == 2, what="both processes registered")
        bid = next(p.decode() for p in r.hkeys(k.procs) if p.decode().split(":")[-2] == str(b.pid))
        assert run("ctl", "lr", "--redis", redis_url, "pause", "--process", bid).returncode == 0
        wait_for(lambda: json.loads(r.hget(k.procs, bid))["state"] == "PAUSED" and r.scard(k.held(bid)) == 0,
                 what=lambda: f"B paused, holding nothing: {r.hget(k.procs, bid)!r}, {r.smembers(k.held(bid))!r}")
        # killed near the end: A finishes while B's last beat is still fresh
        wait_for(lambda: records_of(r, "lr") >= pages - 15, what="A near the end", timeout=60)
        b.kill()
        b.wait()
        killed = time.monotonic()
        (out, err), = finish([a])
        waited = time.monotonic() - killed
    assert r.hget(k.meta, "status") == b"finished" and records_of(r, "lr") == pages
    assert "this was its last process" in err, err[-1500:]
    assert "  crawl 'lr' on Redis, 2 processes" in out and f"  records {pages:,}  pages {pages:,}  " in out, out[-1500:]
    assert r.hget(k.meta, "reporter").decode().split(":")[-2] == str(a.pid)
    # B's last beat was at most a second before the kill; A may claim only 3 s after it
    assert waited >= 1.5, waited


# -- a host that answers nothing, seen by two processes: retired once, for both -------------------

async def test_a_host_that_drops_every_connection_is_left_alone_by_two_processes(serve, redis_url, rundir):
    """Its robots.txt is its first strike in Redis: both processes then send one request at
    a time to it, and five strikes retire it for both; every URL still gets its record."""
    import asyncio

    from support.sites import page
    from support.wholesite import Dropper

    drop = Dropper()
    await drop.start("127.0.0.4")
    try:
        site = await serve({"/": page(*[f"{drop.url}/u{i}" for i in range(30)])})
        proc = await asyncio.create_subprocess_exec(
            *CLI, "crawl", site.url + "/", "--processes", "2", "--redis", redis_url, "--headless", "-c", "10",
            "--name", "dead", "--no-sitemaps", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        await drop.stop()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "crawl 'dead' finished: 31 records from 2 processes" in out.decode()
    assert drop.connections <= 20, drop.connections


# -- --warc with --processes: each process its own files ---------------------------------------

def test_processes_each_write_their_own_warc_files_and_never_overwrite(redis_url, rundir, tmp_path):
    """`--warc` with `--processes 2`: each engine (a `join` child) claims its own
    next files of the series; the first crawl's file is left as it was; every page is in
    exactly one record of the second crawl's files; the parent packs the WACZ at the end."""
    import hashlib

    from warcio.archiveiterator import ArchiveIterator

    pages = 200
    warc, wacz = tmp_path / "pc.warc.gz", tmp_path / "pc.wacz"
    opts = ["--headless", "--no-sitemaps", "--no-robots", "-c", "3", "--warc", str(warc)]
    with counting_site(pages, 0.005) as site_:
        first = subprocess.run([*CLI, "crawl", site_.url, *opts, "--max-pages", "20"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=90)
        assert first.returncode == 0, first.stderr
        assert sorted(p.name for p in tmp_path.glob("pc-*.warc.gz")) == ["pc-00000.warc.gz"]
        before = hashlib.sha256((tmp_path / "pc-00000.warc.gz").read_bytes()).hexdigest()
        done = subprocess.run([*CLI, "crawl", site_.url, "--processes", "2", "--redis", redis_url, "--name", "pw",
                               *opts, "--warc-max-size", "64K", "--wacz", str(wacz)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256((tmp_path / "pc-00000.warc.gz").read_bytes()).hexdigest() == before
    files = sorted(tmp_path.glob("pc-*.warc.gz"))[1:]
    assert len(files) >= 2 and not list(tmp_path.glob("*.open"))
    writers: dict[str, set[str]] = {}
    uris: list[str] = []
    for path in files:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "warcinfo":
                    info = rec.content_stream().read().decode()
                    pid = next(x for x in info.splitlines() if x.startswith("crawltop-pid:"))
                    writers.setdefault(pid, set()).add(path.name)
                    continue
                if rec.rec_type in ("response", "revisit"):
                    uris.append(rec.rec_headers.get_header("WARC-Target-URI"))
    r = redis.Redis.from_url(redis_url)
    by = recorded_by(r, "pw")
    assert len(by) == 2 and all(n > 0 for n in by.values()), by
    assert len(uris) == len(set(uris)) == pages, (len(uris), len(set(uris)))
    assert len(writers) == 2 and not writers[min(writers)] & writers[max(writers)]  # two writers, no shared file
    index = (tmp_path / "pc.cdxj").read_text().splitlines()
    assert len(index) == pages + 20 and index == sorted(index)  # both crawls' records, merged
    assert wacz.stat().st_size > 0


def test_two_writers_of_a_shared_crawl_share_one_digest_map(redis_url, tmp_path):
    """Deduplication across processes: the digest map of a shared crawl lives in Redis: a payload one process
    archived is a revisit in the other's file, however they interleave (HSETNX decides)."""
    from warcio.archiveiterator import ArchiveIterator

    from crawltop.core.cluster.digests import SharedDigests
    from crawltop.core.output.warc import WarcSink

    req = [("User-Agent", "t")]
    body = b"<p>one logo, two processes</p>" * 30
    one = WarcSink(str(tmp_path / "s.warc.gz"), digests=SharedDigests(redis_url, "dd"))
    two = WarcSink(str(tmp_path / "s.warc.gz"), digests=SharedDigests(redis_url, "dd"))
    one.response("http://a.test/logo.png", 200, "OK", [("Content-Type", "image/png")], body, req)
    one.flush()
    two.response("http://a.test/other/logo.png", 200, "OK", [("Content-Type", "image/png")], body, req)
    two.response("http://a.test/again.png", 200, "OK", [("Content-Type", "image/png")], body, req)
    one.close()
    two.close()
    assert (one.responses, one.revisits, two.responses, two.revisits) == (1, 0, 0, 2)
    with open(tmp_path / "s-00001.warc.gz", "rb") as fh:
        revisits = [r for r in ArchiveIterator(fh) if r.rec_type == "revisit"]
    assert {r.rec_headers.get_header("WARC-Refers-To-Target-URI") for r in revisits} == {"http://a.test/logo.png"}
    assert redis.Redis.from_url(redis_url).hlen(Keys("dd").digests) == 1
