"""tests/cluster/: one crawl on Redis (a real redis-server): the Redis frontier, engines and
processes sharing a crawl, faults, the monitor. Beyond tests/conftest.py's `redis_server`,
`redis_url`, `site` and `rundir`: a redis-server on a Unix socket, and real Redis Clusters
(`cluster_one`, `cluster_six`, once per xdist worker; `cluster_url` one node of each,
`shared_url` a plain server then each cluster, for the core tests that run on all three).
A test that takes a cluster is marked `redis` by hand (tests/conftest.py marks the
`redis_server` fixtures by name only)."""
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


# -- real Redis Clusters (tests/support/rediscluster.py): started once per xdist worker --------

@pytest.fixture(scope="session")
def cluster_one():
    """One cluster node holding all 16384 slots, for this worker's whole session."""
    yield from _cluster(1)


@pytest.fixture(scope="session")
def cluster_six():
    """Three masters and three replicas (redis-cli --cluster create), for this worker's session."""
    yield from _cluster(6)


def _cluster(nodes: int):
    import os
    import shutil

    from support.rediscluster import LocalCluster

    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        message = "redis-server and redis-cli are not installed (apt-get install redis-server; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    cluster = LocalCluster.start(nodes)
    yield cluster
    cluster.stop()


@pytest.fixture(params=["one", "six"])
def cluster_url(request) -> str:
    """The URL of one node of a one-node cluster, then of a six-node one: crawltop finds the rest."""
    return request.getfixturevalue(f"cluster_{request.param}").url


@pytest.fixture(params=["server", "one", "six"])
def shared_url(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """The core tests of a shared crawl run three times: on one redis-server (one partition),
    on a one-node cluster with 16 partitions and on a six-node cluster with the default (a
    URL of any one node: crawltop finds the others). CRAWLTOP_PARTITIONS reaches the CLI's
    child processes too."""
    if request.param == "server":
        return request.getfixturevalue("redis_server").url
    if request.param == "one":
        monkeypatch.setenv("CRAWLTOP_PARTITIONS", "16")
    return request.getfixturevalue(f"cluster_{request.param}").url
