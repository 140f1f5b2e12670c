"""The politeness policy: a host's delay, its back-off, its cap and its retirement, as pure
functions of the policy, the host's numbers and the time.

Pure so that they can be checked as arithmetic (tests/engine/test_politeness.py: a table
of rows, a fake clock) and so that one statement of each rule serves every store: the
in-memory scheduler (core/queueing/hosts.py `Hosts`) calls them, the Redis store's Python
side (core/cluster/hosts.py) calls the ones it computes, and the Lua of
core/cluster/scripts.py says the same in Redis (tests/cluster/test_cluster_policy.py holds
the two side by side, row by row). Units are whatever the caller's are: seconds in Python,
milliseconds in Redis.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .hostkeys import QueueBy

# A host that has never answered (refused, reset, silent, closed at once, not resolvable) is
# retired after this many failures in a row at most, and tried one connection at a time.
NEVER_ANSWERED_STRIKES = 2
JITTER = 0.1  # back-offs computed together don't all end together


@dataclass(frozen=True, slots=True)
class Politeness:
    """The per-host rules of a crawl (core/config.py carries the user's values).

    A host's delay is the largest of --delay, robots.txt Crawl-delay (capped by
    --max-crawl-delay), the adaptive delay (--delay-factor x its last response time) and a
    delay set live; its back-off (429/503 with Retry-After, else exponential; connection
    errors and timeouts exponential) blocks it on top. After --host-max-failures failures in
    a row it is retired: every URL still queued for it comes out at once, for its Record.
    """

    delay: float = 0.0
    per_host: int | None = None
    max_crawl_delay: float = 30.0
    delay_factor: float = 0.0
    max_failures: int = 5
    budget: int | None = None  # --max-pages-per-host: URLs admitted per host
    queue_by: QueueBy = "host"
    robots: bool = False  # fetch robots.txt as each host's first request
    backoff: float = 0.5  # first back-off step, seconds; doubles per failure
    max_backoff: float = 60.0  # longest back-off or Retry-After we accept
    # One request at a time to a host until it first answers (a crawl sets it: a dead host then
    # costs a connection or three, not -c of them); off for a store used as a plain queue.
    one_until_answered: bool = False


# -- the delay ---------------------------------------------------------------------------
def plain_source(delay: float) -> str:
    """What a host's delay is called while nothing of its own sets it."""
    return "delay" if delay else ""


def delay_of(policy: Politeness, crawl_delay: float = 0.0, adaptive: float = 0.0,
             live: float | None = None) -> tuple[float, str]:
    """A host's delay, the largest of its sources, and which source that is (the view shows
    it): --delay, robots.txt's Crawl-delay under --max-crawl-delay, the adaptive delay, a
    delay set live. A tie goes to the earlier source, except a live delay, which wins it:
    the user asked for that number."""
    delay, source = policy.delay, plain_source(policy.delay)
    crawl = min(crawl_delay, policy.max_crawl_delay)
    if crawl > delay:
        delay, source = crawl, "robots (capped)" if crawl_delay > policy.max_crawl_delay else "robots"
    if adaptive > delay:
        delay, source = adaptive, "adaptive"
    return with_live(delay, source, live)


def with_live(delay: float, source: str, live: float | None) -> tuple[float, str]:
    """A delay set live over the others: it rules when it is at least as long."""
    if live is not None and live >= delay:
        return live, "live"
    return delay, source


def adaptive_delay(policy: Politeness, latency: float) -> float:
    """--delay-factor times the host's last response time: a slow server is asked less often."""
    return policy.delay_factor * latency


def moved_by_delay(next_at: float, old: float, new: float) -> float:
    """The next-allowed time once the delay changes: a delay counts from the last request's
    start, so the gap already waited is kept (0: the host was never taken, due at once)."""
    return next_at + (new - old) if next_at and new != old else next_at


def gap_after(started: float, delay: float, next_at: float) -> float:
    """The next-allowed time once a request went out at `started`: `delay` after it, never
    earlier than the time already set (a later one: another request, a Crawl-delay)."""
    return started + delay if delay > 0 and started + delay > next_at else next_at


def due_at(next_at: float, backoff_until: float) -> float:
    """When a host may start its next request: its delay passed and its back-off over."""
    return next_at if next_at > backoff_until else backoff_until


# -- how many at once --------------------------------------------------------------------
def cap_of(policy: Politeness, strikes: int, answered: bool) -> int | None:
    """Requests in flight a host may have at once (None: no cap). A host that never answered
    (with one_until_answered), or stopped answering (strikes), gets one at a time until it
    does: a dead host costs a connection or three, not the crawl's workers."""
    if strikes or (policy.one_until_answered and not answered):
        return 1
    return policy.per_host


# -- failures: back-off and retirement -----------------------------------------------------
def is_news(started: float, block_at: float) -> bool:
    """A request tells something new about its host only if it started once the current
    back-off had begun: a backlog of failures sent before it must not inflate the back-off,
    retire the host, or (a success) end a back-off it never saw."""
    return started >= block_at


def backoff_wait(policy: Politeness, failures: int, retry_after: float | None = None) -> float:
    """How long a host backs off after its `failures`-th failure in a row: the server's
    Retry-After, else --backoff doubled per failure; never longer than max_backoff."""
    if retry_after is not None:
        return min(retry_after, policy.max_backoff)
    return min(policy.max_backoff, policy.backoff * 2 ** (failures - 1))


def backoff_until(policy: Politeness, failures: int, now: float, until: float,
                  retry_after: float | None = None, jitter: float = 1.0) -> float:
    """When the host's back-off ends: the wait (times `jitter`, 1 to 1 + JITTER) from now, or
    the back-off in force if that ends later (a Retry-After is a promise)."""
    return max(until, now + backoff_wait(policy, failures, retry_after) * jitter)


def random_jitter() -> float:
    """The in-memory store's jitter: hosts that failed together don't come back together."""
    return random.uniform(1.0, 1.0 + JITTER)


def strike_limit(policy: Politeness, answered: bool) -> int:
    """Failures in a row that retire a host: fewer for one that never answered at all."""
    most = policy.max_failures
    return most if answered else min(most, NEVER_ANSWERED_STRIKES)


def retires(policy: Politeness, strikes: int, answered: bool) -> bool:
    """Whether `strikes` failures in a row retire the host."""
    return strikes >= strike_limit(policy, answered)
