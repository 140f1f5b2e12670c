"""Redis going away mid-crawl: the workers wait (REDIS DOWN shown), and when it comes back
with its data the crawl goes on with nothing lost and nothing twice."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import redis
from support.ctl import serve_site

from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.server import RedisServer, free_port

pytestmark = pytest.mark.timeout(150)
CLI = [sys.executable, "-m", "crawltop.cli"]


@pytest.fixture
def site():
    with serve_site(300, 0.03) as url:
        yield url


def test_redis_restarted_mid_crawl_nothing_lost(site, tmp_path, rundir):
    if shutil.which("redis-server") is None and not os.environ.get("CI"):
        pytest.skip("redis-server is not installed")
    port, where = free_port(), tmp_path / "redis"
    server = RedisServer.start(where, port=port, persist=True)
    url = server.url
    env = {**os.environ, "CRAWLTOP_LEASE": "5"}
    cmd = ["--redis", url, "--headless", "-c", "3"]
    first = subprocess.Popen([*CLI, "crawl", site, "--name", "o", "--no-sitemaps", *cmd],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    r = redis.Redis.from_url(url)
    deadline = time.monotonic() + 30
    while int(r.hget(Keys("o").count, "records") or 0) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.Popen([*CLI, "join", "o", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
    while (r.hlen(Keys("o").procs) < 2 or int(r.hget(Keys("o").count, "records") or 0) < 60) \
            and time.monotonic() < deadline:  # both engines at work
        time.sleep(0.05)
    before = int(r.hget(Keys("o").count, "records"))
    r.close()
    server.kill()  # as a crash: the AOF (fsync always) has every acknowledged write
    time.sleep(4.5)  # > 2 progress lines: each process says REDIS DOWN meanwhile
    server = RedisServer.start(where, port=port, persist=True)
    try:
        outs = [p.communicate(timeout=120) for p in (first, second)]
        assert [p.returncode for p in (first, second)] == [0, 0], outs
        assert all("REDIS DOWN: retrying" in err for _out, err in outs), [e[-500:] for _o, e in outs]
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
