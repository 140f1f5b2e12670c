"""The control surface: what a monitor (the TUI) may read and call on a crawl.

Who implements it: ARCHITECTURE.md ("Control: one surface, many monitors"); structurally,
nothing here is inherited. Optional capabilities are declared in `Monitor.parts`, never probed (`Parts`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .monitor.stats import HostView, Snapshot
from .monitor.summary import Summary

if TYPE_CHECKING:  # types only: `ctl` and `ls` import this without the frontier, to start at once
    from .monitor.queueview import QueueView
    from .steering.ignores import IgnoreResult, IgnoreSetView, IgnoreView
    from .steering.steer import SeedResult


class MonitorStats(Protocol):
    """What a monitor reads of a crawl's numbers (core/monitor/stats.py Stats, or a copy)."""

    @property
    def state(self) -> str: ...
    def snapshot(self) -> Snapshot: ...
    def summary(self) -> Summary: ...  # O(1): the dashboard's row (core/monitor/summary.py)
    def top_error_urls(self, n: int = 10) -> list[tuple[str, int]]: ...


class HasRoots(Protocol):
    """The part of a crawl's config a monitor reads: its roots show by path."""

    @property
    def roots(self) -> Sequence[str]: ...


class HostTable(Protocol):
    """Every host's row, sorted and filtered (the queues view, `ctl hosts`)."""

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]: ...


class Ignoring(Protocol):
    """Adding and removing ignore patterns."""

    async def add_ignore(self, pattern: str) -> IgnoreResult: ...
    def remove_ignore(self, pattern: str) -> bool: ...


class Steer(HostTable, Ignoring, Protocol):
    """Steering an engine: ignores, seeds, hosts, the queue view (core/steering/steer.py)."""

    def ignores(self) -> tuple[IgnoreView, ...]: ...
    async def set_ignore_set(self, name: str, on: bool) -> IgnoreResult: ...
    def ignore_sets(self) -> tuple[IgnoreSetView, ...]: ...
    def add_seed(self, url: str) -> SeedResult: ...
    def pause_host(self, host: str) -> bool: ...
    def resume_host(self, host: str) -> int: ...
    def paused_hosts(self) -> dict[str, int]: ...
    def set_host_delay(self, host: str, seconds: float) -> None: ...
    def queue_view(self, n: int = 10) -> QueueView: ...


class Detach(Protocol):
    """A monitor in its own process: it can leave the crawl running (`d`)."""

    def detach(self) -> None: ...


class Cluster(Protocol):
    """A crawl shared by many processes: their rows and one process's keys.

    Rows are core/cluster/procs.py ProcessRow, not named here: core.cluster builds on
    this module, so this module does not import it back; so are `nodes()`, the Redis
    Cluster's masters (core/cluster/nodes.py NodeRow; none on a plain Redis)."""

    def processes(self) -> list[Any]: ...
    def nodes(self) -> list[Any]: ...
    def pause_process(self, proc: str) -> None: ...
    def resume_process(self, proc: str) -> None: ...
    def stop_process(self, proc: str) -> None: ...


class Parts:
    """A crawl's optional parts: each one, or None. `ignoring` and `host_table` are
    the steering's own unless given (a monitor may have those without the rest).

    A part may be the crawl itself or another object (a Crawler's steering is its `Steering`
    component), and which parts there are may depend on how the crawl was built (a
    ClusterView with or without an engine of its own), so it is asked for, not found with
    getattr or isinstance.
    """

    __slots__ = ("steer", "ignoring", "host_table", "detach", "cluster")

    def __init__(self, *, steer: Steer | None = None, ignoring: Ignoring | None = None,
                 host_table: HostTable | None = None, detach: Detach | None = None,
                 cluster: Cluster | None = None) -> None:
        self.steer = steer
        self.ignoring: Ignoring | None = ignoring if ignoring is not None else steer
        self.host_table: HostTable | None = host_table if host_table is not None else steer
        self.detach = detach
        self.cluster = cluster


class Monitor(Protocol):
    """What every monitor reads and the keys every crawl answers."""

    @property
    def stats(self) -> MonitorStats: ...
    @property
    def paused(self) -> bool: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def config(self) -> HasRoots: ...
    @property
    def parts(self) -> Parts: ...
    async def crawl(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def set_concurrency(self, n: int) -> None: ...
    def cancel_worker(self, worker_id: int) -> bool: ...
    def stop(self) -> None: ...


class Engine(Monitor, Protocol):
    """A crawl in this process (a Crawler, or a Member around one): what its control
    socket serves (core/sockets/server.py) besides the commands of core/sockets/protocol.py."""

    @property
    def roots(self) -> Sequence[str]: ...
