"""Redis going away mid-crawl: the workers wait (REDIS DOWN shown), and when it comes back
with its data the crawl goes on with nothing lost and nothing twice."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis
from support.ctl import serve_site
from support.wait import wait_for

from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.server import RedisServer, free_port

pytestmark = [pytest.mark.timeout(150), pytest.mark.redis]
CLI = [sys.executable, "-m", "crawltop.cli"]


@pytest.fixture
def site():
    with serve_site(300, 0.03) as url:
        yield url


def test_redis_restarted_mid_crawl_nothing_lost(site, tmp_path, rundir):
    port, where = free_port(), tmp_path / "redis"
    server = RedisServer.start(where, port=port, persist=True)
    url = server.url
    env = {**os.environ, "CRAWLTOP_LEASE": "5"}
    cmd = ["--redis", url, "--headless", "-c", "3"]
    errs = [tmp_path / "first.err", tmp_path / "second.err"]  # files: read while the processes run
    with errs[0].open("w") as err:
        first = subprocess.Popen([*CLI, "crawl", site, "--name", "o", "--no-sitemaps", *cmd],
                                 stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    r = redis.Redis.from_url(url)
    wait_for(lambda: int(r.hget(Keys("o").count, "records") or 0) >= 20, what="the first process's records")
    with errs[1].open("w") as err:
        second = subprocess.Popen([*CLI, "join", "o", *cmd], stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    wait_for(lambda: r.hlen(Keys("o").procs) >= 2 and int(r.hget(Keys("o").count, "records") or 0) >= 60,
             what="both engines at work")
    before = int(r.hget(Keys("o").count, "records"))
    r.close()
    server.kill()  # as a crash: the AOF (fsync always) has every acknowledged write
    # each process says REDIS DOWN on its progress line while it waits for Redis
    wait_for(lambda: all("REDIS DOWN: retrying" in e.read_text() for e in errs), what="REDIS DOWN from both")
    server = RedisServer.start(where, port=port, persist=True)
    try:
        outs = [(p.communicate(timeout=120)[0], e.read_text()) for p, e in zip((first, second), errs, strict=True)]
        assert [p.returncode for p in (first, second)] == [0, 0], outs
        r = redis.Redis.from_url(url)
        assert r.hget(Keys("o").meta, "status") == b"finished"
        assert int(r.hget(Keys("o").count, "records")) > before
        done = subprocess.run([*CLI, "export", "--redis", url, "o", "--jsonl", str(tmp_path / "o.jsonl")],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        recs = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
        urls = [x["url"] for x in recs]
        assert len(urls) == len(set(urls)) == 300
        assert {x["status"] for x in recs} == {200}
        r.close()
    finally:
        server.stop()
