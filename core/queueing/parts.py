"""A frontier's optional parts, beyond core/queueing/frontier.py's `Frontier`.

Each is a small runtime-checkable Protocol. A store declares a part by implementing it;
the crawler asks once, with isinstance, where it is built or starts (never getattr).
The in-memory store, the SQLite store (core/storage/store.py) and the Redis store
(core/cluster/frontier.py) each have some of them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .hosts import Hosts


@runtime_checkable
class Scheduled(Protocol):
    """Queues by host (core/queueing/hosts.py, or in Redis core/cluster/hosts.py): required by
    the crawler, whose workers take a host's turn and its delay from it."""

    hosts: Hosts

    def next_wake_in(self) -> float | None:
        """Seconds until the earliest host comes due (None: nothing could)."""


@runtime_checkable
class Failing(Protocol):
    """A store whose writer (a thread, a server) can fail on its own: the crawler sets
    `on_error` and stops with that error."""

    on_error: Callable[[BaseException], None] | None


@runtime_checkable
class Lookup(Protocol):
    """An exact `seen` that may cost a round trip (a cluster asks Redis)."""

    async def lookup(self, url: str) -> bool: ...


@runtime_checkable
class Settings(Protocol):
    """Settings kept with the crawl (the SQLite store): ignores and added seeds survive
    a resume."""

    settings: dict[str, Any]

    def set_setting(self, key: str, value: Any) -> None: ...
