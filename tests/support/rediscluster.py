"""Real local Redis Clusters for the tests: six nodes (three masters, three replicas) made
with `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes` (no terminal to
answer its prompt), and one node holding all 16384 slots (`CLUSTER ADDSLOTSRANGE`).

Each node listens on a free loopback port whose cluster bus port (port + 10000) is free too,
in a temp directory of its own, so several xdist workers each run their own clusters. A
cluster is ready when every node says `cluster_state:ok` (and, for six, that it knows all
six): polled through tests/support/wait.py, never slept for. Stopping kills every node and
waits for each, so no redis-server outlives the session.
"""
from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from support.wait import wait_for

SLOTS = 16384


_TAKEN: set[int] = set()  # ports this process gave out: a node not listening yet looks free
_RANDOM = random.Random()  # its own, seeded from the OS: a test seeding `random` can't repeat ports


def free_pair() -> int:
    """A free loopback port whose cluster bus port (10000 above it) is free too, never one
    this process gave out before (or its bus port)."""
    for port in _RANDOM.sample(range(20000, 40000), 400):
        if {port, port + 10000} & _TAKEN:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        _TAKEN.update((port, port + 10000))
        return port
    raise AssertionError("no free pair of ports for a cluster node")


def say(port: int, *words: str) -> str:
    """One command to a node on a fresh connection (RESP, so arguments may hold spaces): its
    reply's text, or "" when the node cannot be reached."""
    cmd = f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(cmd.encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                data += chunk
                if not chunk or _complete(data):
                    break
            return data.decode(errors="replace")
    except OSError:
        return ""


def _complete(data: bytes) -> bool:
    """A single reply of the kinds asked here (status, error, integer, bulk string) is whole."""
    if data[:1] in (b"+", b"-", b":"):
        return data.endswith(b"\r\n")
    if data[:1] == b"$":
        head, _, rest = data.partition(b"\r\n")
        return len(rest) >= int(head[1:]) + 2 if int(head[1:]) >= 0 else True
    return False


class LocalCluster:
    """Redis Cluster nodes, their processes and their directory."""

    def __init__(self, base: Path, ports: list[int], procs: list[subprocess.Popen[bytes]],
                 replicas: int = 0) -> None:
        self.base, self.ports, self.procs = base, ports, procs
        self.replicas = replicas  # each node must know this many replicas before the cluster is ready

    @property
    def url(self) -> str:
        """The URL of one node: any node is enough for crawltop."""
        return f"redis://127.0.0.1:{self.ports[0]}"

    def urls(self) -> list[str]:
        return [f"redis://127.0.0.1:{p}" for p in self.ports]

    @classmethod
    def start(cls, nodes: int, *, replicas: int = 1, slots: bool = True, node_timeout: int = 5000) -> LocalCluster:
        """`nodes` == 1: one master with every slot (none if not `slots`: a cluster node that
        serves nothing); more: made by redis-cli, `replicas` per master (6 and 1: three
        masters and three replicas; 3 and 0: three masters). `node_timeout` (ms): how long a
        node may be silent before the others count it failed (a failover follows). A node
        that never answers (another process took its port, or its bus port, between the
        check and the bind) costs one more try on other ports, not the test."""
        for tries in range(3):
            try:
                return cls._start_once(nodes, replicas=replicas, slots=slots, node_timeout=node_timeout)
            except AssertionError:
                if tries == 2:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(cls, nodes: int, *, replicas: int, slots: bool, node_timeout: int) -> LocalCluster:
        if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
            raise RuntimeError("redis-server and redis-cli are needed (apt-get install redis-server)")
        base = Path(tempfile.mkdtemp(prefix="ctc"))
        ports, procs = [], []
        cluster = cls(base, ports, procs, nodes - nodes // (replicas + 1) if nodes > 1 else 0)
        try:
            for _ in range(nodes):
                port = free_pair()
                d = base / str(port)
                d.mkdir()
                procs.append(subprocess.Popen(
                    ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf"),
                     "--cluster-node-timeout", str(node_timeout), "--repl-diskless-sync-delay", "0",
                     "--dir", str(d), "--daemonize", "no",
                     "--loglevel", "warning", "--logfile", str(d / "redis.log")],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                ports.append(port)
            for port in ports:
                wait_for(lambda port=port: say(port, "PING").startswith("+PONG"), 10, f"cluster node {port} to start")
            if nodes == 1:
                if not slots:
                    return cluster
                assert say(ports[0], "CLUSTER", "ADDSLOTSRANGE", "0", str(SLOTS - 1)).startswith("+OK")
            else:
                subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in ports),
                                "--cluster-replicas", str(replicas), "--cluster-yes"],
                               stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=120)
            wait_for(cluster.ready, 60, lambda: f"cluster on {ports} to be ready: {cluster.states()}")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def states(self) -> dict[int, str]:
        return {p: say(p, "CLUSTER", "INFO") for p in self.ports}

    def ready(self) -> bool:
        """Every node says the cluster is ok, with every slot served, knows every node, and
        knows every replica as one, each with its copy of its master made (redis-cli makes
        them replicas after the join: until a replica has synced, killing its master would
        leave the master's slots to nobody)."""
        for p in self.ports:
            info = say(p, "CLUSTER", "INFO")
            if ("cluster_state:ok" not in info or f"cluster_slots_ok:{SLOTS}" not in info
                    or f"cluster_known_nodes:{len(self.ports)}" not in info):
                return False
            nodes = [line.split() for line in say(p, "CLUSTER", "NODES").splitlines()[1:] if line.strip()]
            if sum("slave" in fields[2].split(",") for fields in nodes if len(fields) > 2) != self.replicas:
                return False
            repl = say(p, "INFO", "replication")
            if "role:slave" in repl and "master_link_status:up" not in repl:  # its copy not made yet: no failover
                return False
        return True

    def masters(self) -> list[int]:
        """Ports of the nodes that serve slots now."""
        return [p for p in self.ports if "role:master" in say(p, "INFO", "replication")]

    def node_of(self, slot: int) -> int:
        """The port of the master serving `slot`, as the first node that answers says."""
        for p in self.ports:
            for line in say(p, "CLUSTER", "NODES").splitlines()[1:]:
                fields = line.split()
                if len(fields) > 8 and "master" in fields[2]:
                    for rng in fields[8:]:
                        lo, _, hi = rng.partition("-")
                        if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                            return int(fields[1].split(":")[1].split("@")[0])
        raise AssertionError(f"no master serves slot {slot}")

    def node_id(self, port: int) -> str:
        return say(port, "CLUSTER", "MYID").split("\r\n")[1]

    def move_slot(self, slot: int, source: int, target: int, *, batch: int = 1,
                  between: Callable[[], None] | None = None, order: Callable[[bytes], object] | None = None,
                  limit: int | None = None) -> int:
        """Slot `slot` moved from master `source` to master `target` (ports) by hand, as
        `redis-cli --cluster reshard` does it: IMPORTING on the target, MIGRATING on the
        source, its keys MIGRATEd `batch` at a time (`between` called after each batch, so a
        test can let a crawl run while the slot is half moved; the keys there at the start
        sorted by `order`, then any made meanwhile), then the slot given to the target on
        every master; with `limit`, only that many keys, the slot left half moved. Returns
        how many keys moved."""
        import redis

        ids = {p: self.node_id(p) for p in (source, target)}
        src, dst = (redis.Redis(host="127.0.0.1", port=p, socket_timeout=30) for p in (source, target))
        moved = 0
        try:
            assert dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source])
            assert src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target])
            first = sorted(src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1_000_000), key=order)
            while keys := first[:batch] or src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
                del first[:batch]
                # a key of the first list gone since (a queue emptied) is no error: MIGRATE says NOKEY
                src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 10_000, "REPLACE", "KEYS", *keys)
                moved += len(keys)
                if between is not None:
                    between()
                if limit is not None and moved >= limit:
                    return moved
            for port in [target, source, *(p for p in self.masters() if p not in (source, target))]:
                say(port, "CLUSTER", "SETSLOT", str(slot), "NODE", ids[target])
        finally:
            src.close()
            dst.close()
        return moved

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait(10)
        shutil.rmtree(self.base, ignore_errors=True)
