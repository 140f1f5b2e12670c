"""`FrontierOps`: what the Redis hosts (core/cluster/hosts.py) ask of the Redis frontier
that holds them (core/cluster/frontier.py), so the hosts need not import the frontier."""
from __future__ import annotations

from typing import Protocol

from ..item import Item


class FrontierOps(Protocol):
    def soon(self, within: float = ...) -> None:
        """Send the pending host events within `within` seconds."""

    def requeue(self, item: Item, after: float = 0.0) -> None:
        """First in its host's queue at done(), or in `after` seconds."""

    def done(self, item: Item) -> None:
        """The URL is finished."""

    def host_ctl(self, op: str, host: str, value: str = "") -> None:
        """Pause, resume or a live delay for one host, for the whole crawl."""
