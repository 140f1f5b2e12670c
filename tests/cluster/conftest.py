"""tests/cluster/: one crawl on Redis (a real redis-server): the Redis frontier, engines and
processes sharing a crawl, faults, the monitor. Beyond tests/conftest.py's `redis_server`,
`redis_url`, `site` and `rundir`: a redis-server on a Unix socket."""
from __future__ import annotations

import pytest


@pytest.fixture
def redis_unix_server():
    """A private redis-server on a Unix socket (no TCP port), in a short temp directory
    (sun_path is 107 bytes). Skipped or failed as `redis_server` is."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from crawltop.core.cluster.server import RedisServer

    if shutil.which("redis-server") is None:
        message = "redis-server is not installed (apt-get install redis-server; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    base = Path(tempfile.mkdtemp(prefix="ctr"))
    server = RedisServer.start(base / "redis")
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)
