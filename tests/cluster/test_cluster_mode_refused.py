"""A Redis Cluster node given as --redis: one line and exit 2 that say it is a cluster, for
every command that opens a shared crawl (a crawl's keys share one hash tag, so all masters but
one would answer MOVED, which once read as "foreign data")."""
from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import run
from support.wait import wait_for

pytestmark = pytest.mark.redis


def _free_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free too."""
    for port in random.sample(range(20000, 40000), 200):
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise AssertionError("no free pair of ports for a cluster node")


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[str]:
    """One redis-server with cluster mode on (no slots assigned: what matters is that it is one)."""
    if shutil.which("redis-server") is None:
        message = "redis-server is not installed (apt-get install redis-server; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = _free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf"),
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        wait_for(answers, 10, "the cluster node to answer")
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("argv", [
    ("crawl", "http://127.0.0.1:9/", "--name", "n"),
    ("join", "n"),
    ("export", "n", "--jsonl", "-"),
])
def test_a_cluster_node_is_refused_in_one_line(cluster_node: str, argv: tuple[str, ...]) -> None:
    done = run(*argv, "--redis", cluster_node, timeout=30)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "is a node of a Redis Cluster" in lines[0] and cluster_node in lines[0], lines[0]
    assert "foreign data" not in done.stderr
