"""When a crawl in several partitions is finished.

One partition knows atomically that it is empty (nothing queued, nothing leased), not that
the others are: a page leased in partition A may still add links to partition B. The rule
that makes it safe: a page's links reach their partitions before the page's DONE
(core/cluster/parted.py sends them first), and every change of what a partition holds
bumps its change counter `ch` (scripts.py `changed`). So a pass that reads every partition
empty, and a second pass that reads the same counters, saw one moment at which nothing was
queued or leased anywhere: whatever happened between the two reads of a partition would
have changed its counter. Then nothing can ever be added again, and the crawl is finished.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable

State = list[tuple[int, int, int]]  # per partition: queued, leased, changes


def all_empty(state: State) -> bool:
    return all(q == 0 and n == 0 for q, n, _c in state)


async def finished(read: Callable[[], Awaitable[State]]) -> bool:
    """Two passes of `read` (every partition's state, core/cluster/parted.py reads them in one
    pipeline): every partition empty in both, and no counter moved in between."""
    first = await read()
    if not all_empty(first):
        return False
    return await read() == first
