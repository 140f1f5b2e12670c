"""The shared crawl as operators run it: real crawltop processes, a real redis-server, a
real site in its own process; one killed with SIGKILL mid-crawl loses nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from support.cluster import CLI, recorded_by, records_of, run, start
from support.ctl import serve_site
from support.sites import counting_site
from support.wait import wait_for

from crawltop.core.cluster.keys import Keys

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def slow_site():
    """300 pages, 40 ms each: long enough to kill a process in the middle."""
    with serve_site(300, 0.04) as url:
        yield url


@pytest.mark.timeout(180)
def test_three_processes_one_killed_nothing_lost_nothing_twice(redis_url, rundir, tmp_path):
    """Three processes on a 3,000-page site; one gets SIGKILL mid-crawl. The other two
    finish (exit 0, one writes the final report); the export has every page once; and the
    only pages the server served twice are ones the killed process held leases on when it
    died (read from its held:PROC set in Redis while it was frozen, just before the kill)."""
    pages, k = 3000, Keys("k")
    with counting_site(pages, 0.01) as counted:
        env = {"CRAWLTOP_LEASE": "6"}  # short, so the test ends soon; long enough for 5 processes on 2 cores
        common = ["--redis", redis_url, "--headless", "-c", "4"]
        victim = start("crawl", counted.url, "--name", "k", "--no-sitemaps", "--no-robots", *common, env=env)
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: records_of(r, "k") >= 10, what="the first process's records")
        others = [start("join", "k", *common, env=env) for _ in range(2)]
        wait_for(lambda: r.hlen(k.procs) == 3 and records_of(r, "k") >= pages // 4, what="three processes at work")
        vid = next(p.decode() for p in r.hkeys(k.procs) if p.decode().split(":")[-2] == str(victim.pid))
        held: set[str] = set()

        def frozen_holding() -> bool:
            """Frozen: what it holds can't change between our reading and the kill. Caught
            between two pops (nothing held), it runs on and is tried again."""
            victim.send_signal(signal.SIGSTOP)
            held.update(json.loads(raw.split(b" ", 1)[1])[0] for raw in r.smembers(k.held(vid)))
            if not held:
                victim.send_signal(signal.SIGCONT)
            return bool(held)

        wait_for(frozen_holding, what="the victim holding leases")
        at_kill = records_of(r, "k")
        victim.send_signal(signal.SIGKILL)  # no goodbye: its leases must run out and come back
        victim.wait()
        outs = [p.communicate(timeout=120) for p in others]
        assert [p.returncode for p in others] == [0, 0], [err[-2000:] for _out, err in outs]
        assert held and at_kill < pages, (len(held), at_kill)  # it died mid-crawl, holding work
        last = [out for out, err in outs if "this was its last process" in err]
        assert len(last) == 1, [err[-500:] for _out, err in outs]  # one final report, by the last one out
        assert "  crawl 'k' on Redis, " in last[0] and f"  records {pages:,}  pages {pages:,}  " in last[0], last[0]
        assert r.hget(k.meta, "status") == b"finished"
        assert int(r.hget(k.meta, "reaped") or 0) >= len(held)  # every lease it held came back
        assert int(r.hget(k.count, "rejected") or 0) == 0  # no live process lost a lease
        by = recorded_by(r, "k")
        assert len(by) == 3 and all(n > 0 for n in by.values()), by  # all three took part
        hits = counted.stats()["hits"]
    expected = {"/", *(f"/p/{i}" for i in range(1, pages))}
    assert set(hits) == expected
    twice = {path for path, n in hits.items() if n > 1}
    held_paths = {urlsplit(u).path for u in held}
    assert twice <= held_paths, (sorted(twice - held_paths)[:10], len(held))
    assert len(twice) <= len(held)
    done = run("export", "--redis", redis_url, "k", "--jsonl", str(tmp_path / "k.jsonl"))
    assert done.returncode == 0, done.stderr
    recs = [json.loads(line) for line in (tmp_path / "k.jsonl").read_text().splitlines()]
    urls = [urlsplit(x["url"]).path for x in recs]
    assert len(urls) == len(set(urls)) == pages and set(urls) == expected
    assert {x["status"] for x in recs} == {200}


def test_export_trim_bounds_redis(slow_site, redis_url, rundir, tmp_path):
    crawl = run("crawl", slow_site, "--redis", redis_url, "--name", "t", "--headless", "-c", "8", "--no-sitemaps",
                "--max-pages", "40")
    assert crawl.returncode == 0, crawl.stderr
    rep = run("report", "--redis", redis_url, "t", "--format", "json")
    assert rep.returncode == 0 and json.loads(rep.stdout)["records"] == 40, rep.stderr
    assert run("report", "--redis", redis_url, "nobody").returncode == 2
    a = run("export", "--redis", redis_url, "t", "--jsonl", str(tmp_path / "a.jsonl"), "--trim")
    assert a.returncode == 0 and "trimmed 40" in a.stderr, a.stderr
    b = run("export", "--redis", redis_url, "t", "--csv", str(tmp_path / "b.csv"))
    assert b.returncode == 0 and "exported 0 records" in b.stderr
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 40


@pytest.mark.redis
def test_processes_with_a_private_redis(slow_site, rundir, tmp_path):
    done = subprocess.run([*CLI, "crawl", slow_site, "--processes", "2", "--headless", "-c", "4", "--name", "pp",
                           "--no-sitemaps"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "crawl 'pp' finished: 300 records from 2 processes (exit codes 0, 0)" in done.stdout
    assert "  crawl 'pp' on Redis, 2 processes\n  records 300  pages 300  " in done.stdout
    assert not list((rundir.parent / "state" / "crawltop" / "redis" / "pp").glob("*.sock"))  # stopped, cleaned


@pytest.mark.parametrize("case", ["unreachable", "password", "settings", "foreign", "state-mix", "no-redis-server",
                                  "detach-processes"])
def test_bad_input_one_line_exit_2(case, redis_server, tmp_path, rundir):
    url = redis_server.url
    env = None
    args = ["crawl", "http://127.0.0.1:9/", "--redis", url, "--name", "b", "--headless"]
    if case == "unreachable":
        args[3] = "redis://127.0.0.1:9/0"
    elif case == "password":
        redis.Redis.from_url(url).config_set("requirepass", "sesame")
        args[3] = url.replace("redis://", "redis://:wrong@")
    elif case == "settings":
        assert run(*args, "--max-pages", "1").returncode == 0
        args += ["--max-depth", "3"]
    elif case == "foreign":
        redis.Redis.from_url(url).rpush("crawltop:{b}:q", "not ours")
    elif case == "state-mix":
        args += ["--state", str(tmp_path / "s.db")]
    elif case == "no-redis-server":
        args = ["crawl", "http://127.0.0.1:9/", "--processes", "2", "--headless"]
        env = {"PATH": str(tmp_path)}  # no redis-server on it
    elif case == "detach-processes":
        args = ["crawl", "http://127.0.0.1:9/", "--processes", "2", "--detach"]
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crawltop: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    expect = {"unreachable": "cannot reach Redis", "password": "password", "settings": "other settings",
              "foreign": "foreign data", "state-mix": "don't mix", "no-redis-server": "apt-get install redis-server",
              "detach-processes": "--detach and --processes don't mix"}
    assert expect[case] in lines[0]


def test_redis_refusing_mid_crawl_is_one_line_not_a_hang(slow_site, redis_url, rundir):
    """A password set while the crawl runs: the process stops with one line, exit 2."""
    proc = start("crawl", slow_site, "--redis", redis_url, "--name", "pw", "--headless", "-c", "2", "--no-sitemaps")
    r = redis.Redis.from_url(redis_url)
    wait_for(lambda: int(r.hget(Keys("pw").count, "records") or 0) >= 5, what="five records")
    r.config_set("requirepass", "sesame")
    r.client_kill_filter(_type="normal", skipme=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("crawltop: error: Redis refused")], err


@pytest.mark.redis
def test_a_killed_processes_parent_leaves_nothing_behind(slow_site, rundir):
    """SIGKILL to `crawl --processes 2`: its engines and its redis-server go too."""
    parent = start("crawl", slow_site, "--processes", "2", "--headless", "-c", "2", "--name", "orph")
    children: list[int] = []

    def three_children() -> bool:  # two engines and redis-server
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(parent.pid)], capture_output=True, text=True)
        children[:] = [int(p) for p in out.stdout.split()]
        return len(children) == 3

    wait_for(three_children, what=lambda: f"the parent's three children: {children}")
    # killed at once: an engine forked a moment ago arms PDEATHSIG and then checks its parent
    parent.kill()
    parent.wait()

    def alive() -> list[int]:
        return [p for p in children if Path(f"/proc/{p}").exists() and
                "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0]]

    wait_for(lambda: alive() == [], timeout=20, what=lambda: f"children still alive: {alive()}")


def test_ctl_steers_the_whole_crawl_or_one_process(site, redis_url, rundir):
    def ctl(*args: str) -> dict:
        done = run("ctl", "c", "--redis", redis_url, *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    a = start("crawl", site, "--redis", redis_url, "--name", "c", "--headless", "-c", "2", "--no-sitemaps")
    r = redis.Redis.from_url(redis_url)
    wait_for(lambda: r.hlen(Keys("c").procs) >= 1, what="the first process")
    b = start("join", "c", "--redis", redis_url, "--headless", "-c", "2")
    wait_for(lambda: r.hlen(Keys("c").procs) >= 2, what="the second process")
    ctl("pause")
    wait_for(lambda: {p["state"] for p in ctl("status")["processes"]} == {"PAUSED"}, what="both paused")
    status = ctl("status")
    assert [p["state"] for p in status["processes"]] == ["PAUSED", "PAUSED"]
    one = status["processes"][0]["proc"]
    ctl("resume", "--process", one)
    wait_for(lambda: {p["proc"]: p["state"] for p in ctl("status")["processes"]}[one] == "RUNNING",
             what="the resumed process running")
    states = {p["proc"]: p["state"] for p in ctl("status")["processes"]}
    assert states[one] == "RUNNING" and [s for p, s in states.items() if p != one] == ["PAUSED"]
    bad = run("ctl", "c", "--redis", redis_url, "pause", "--process", "nobody:1:0")
    assert bad.returncode == 1 and "no process" in bad.stderr
    assert ctl("stop")["status"] == "stopped"
    for p in (a, b):
        assert p.wait(timeout=60) == 0
    after = ctl("status")  # no process left: the totals come from Redis
    assert after["processes"] == [] and after["records"] == int(r.hget(Keys("c").count, "records")) > 0
    assert r.hget(Keys("c").meta, "status") == b"stopped" and r.hlen(Keys("c").procs) == 0
    assert int(r.hget(Keys("c").count, "queued") or 0) > 0 and r.zcard(Keys("c").leases) == 0  # the rest waits in Redis
