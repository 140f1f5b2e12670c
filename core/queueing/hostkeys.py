"""A URL's politeness key: the queue it waits in and the delay it shares.

By host:port (the default), or by registered domain (`--queue-by domain`), so the names of
one site (www., img., cdn.) share one delay. Its own module because both stores, in memory
(core/queueing/hosts.py) and in Redis (core/cluster/hosts.py), key their hosts the same way.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Literal

from ..parsing.urls import netloc_of
from .scope import registered_domain

QueueBy = Literal["host", "domain"]


@lru_cache(maxsize=65536)
def domain_key(netloc: str) -> str:
    """The registered domain of a host[:port] (an IP or a bare name stays itself)."""
    if netloc.startswith("["):
        return netloc[: netloc.index("]") + 1]
    return registered_domain(netloc.rsplit(":", 1)[0] if ":" in netloc else netloc)


def key_function(queue_by: QueueBy) -> Callable[[str], str]:
    """URL -> its politeness key: host:port, or the registered domain."""
    return netloc_of if queue_by == "host" else (lambda url: domain_key(netloc_of(url)))
