"""tests/cluster/: one crawl on Redis (a real redis-server): the Redis frontier, engines and
processes sharing a crawl, faults, the monitor. Beyond tests/conftest.py's `redis_server`,
`redis_url`, `site` and `rundir`: a redis-server on a Unix socket."""
from __future__ import annotations

import pytest


@pytest.fixture
def redis_unix_server():
    """A private redis-server on a Unix socket (no TCP port), in a short temp directory
    (sun_path is 107 bytes). Marked `redis` as `redis_server` is (tests/conftest.py)."""
    import shutil
    import tempfile
    from pathlib import Path

    from crawltop.core.cluster.server import RedisServer

    base = Path(tempfile.mkdtemp(prefix="ctr"))
    server = RedisServer.start(base / "redis")
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)
