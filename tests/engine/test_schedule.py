"""Scheduling by host on a fake clock: `Hosts` (core/queueing/hosts.py) and the in-memory
frontier (core/queueing/frontier.py) driven with explicit times, each step's answer exact.
No sockets and no sleeps: the time is a number the test passes (`take(now)`,
`failed(..., now)`) or sets (`MemoryFrontier.clock`). Back-offs have no jitter here
(`Hosts.jitter`); its bound is tests/engine/test_politeness.py's."""
from __future__ import annotations

import asyncio

import pytest

from crawltop.core.queueing.frontier import MemoryFrontier
from crawltop.core.queueing.hosts import (
    ANSWERED,
    CHECKS,
    NEEDS_PROBE,
    NEEDS_ROBOTS,
    PAGES,
    RETIRED,
    STEP_PENDING,
    Host,
    Hosts,
)
from crawltop.core.queueing.item import Item
from crawltop.core.queueing.politeness import NEVER_ANSWERED_STRIKES, Politeness


def hosts(**policy: object) -> Hosts:
    """A Hosts with these rules, no jitter, and the lanes: a URL of `site` is a page, any
    other host's a check."""
    h = Hosts()
    h.configure(Politeness(**policy))  # type: ignore[arg-type]
    h.jitter = lambda: 1.0
    h.sort_into_lanes(lambda url: "://site" not in url)
    return h


def queue(h: Hosts, *urls: str) -> None:
    for url in urls:
        assert h.admit(Item(url, 0, 0))


def taken(h: Hosts, now: float, lane: int = PAGES) -> str | None:
    got = h.take(now, lane)
    return None if got is None else got[0].url


def timeline(h: Hosts, steps: list[tuple[float, str | None]], lane: int = PAGES) -> list[str | None]:
    """What take() gives at each time of `steps` (the expected answers are beside them)."""
    return [taken(h, now, lane) for now, _ in steps]


# -- the gap -------------------------------------------------------------------------------
GAP = [(100.0, "http://site/a"), (100.0, None), (100.999, None), (101.0, "http://site/b"),
       (101.5, None), (102.0, "http://site/c"), (500.0, None)]


def test_a_host_gives_one_url_per_delay() -> None:
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://site/b", "http://site/c")
    assert timeline(h, GAP) == [url for _, url in GAP]


def test_the_wake_is_the_next_due_time_and_the_gap_counts_from_the_start() -> None:
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://site/b")
    assert h.next_wake(PAGES) == 0.0 and h.next_wake(CHECKS) is None  # new: due at once
    got = h.take(100.0)
    assert got is not None
    host = got[1]
    assert h.next_wake(PAGES) == 101.0
    h.started(host, 100.25)  # the request went out a little later than it was taken
    # A later time costs no push: the wake stays early (a waiter looks once more), and the
    # take() that finds the host not due yet moves it back in line, to the exact time.
    assert host.next_at == 101.25 and h.next_wake(PAGES) == 101.0
    assert taken(h, 101.0) is None and h.next_wake(PAGES) == 101.25
    assert taken(h, 101.25) == "http://site/b"
    h.started(host, 101.0)  # an earlier start never moves the time back
    assert host.next_at == 102.25


TURNS = [(1.0, "http://site/a1"), (1.0, "http://site2/b1"), (2.0, "http://site/a2"), (2.0, "http://site2/b2"),
         (3.0, "http://site/a3"), (3.0, "http://site2/b3"), (3.0, "http://site/a4"), (3.0, "http://site/a5")]


def test_due_hosts_take_turns_oldest_due_first() -> None:
    """A host with five URLs and one with three, a delay of 1: each gives one URL a second,
    side by side, then the larger one goes on alone; the small one is never starved."""
    h = hosts(delay=1.0)
    queue(h, *(f"http://site/a{i}" for i in range(1, 6)), *(f"http://site2/b{i}" for i in range(1, 4)))
    got = timeline(h, [(t, u) for t, u in TURNS[:6]])
    assert got == [u for _, u in TURNS[:6]]
    assert timeline(h, [(4.0, ""), (5.0, ""), (5.5, "")]) == ["http://site/a4", "http://site/a5", None]


def test_a_small_host_is_not_starved_by_a_large_one() -> None:
    """No delay, one worker (each URL finished before the next is taken): 150 URLs of one
    host and 5 of another alternate, so the small host's 5 are all among the first 10."""
    h = hosts()
    queue(h, *(f"http://site/big{i}" for i in range(150)), *(f"http://site2/small{i}" for i in range(5)))
    order = []
    for t in range(1, 13):
        got = h.take(float(t))
        assert got is not None
        order.append(got[0].url.rsplit("/", 1)[1])
        h.finished(got[1])
    assert order == ["big0", "small0", "big1", "small1", "big2", "small2", "big3", "small3", "big4", "small4",
                     "big5", "big6"]


def test_queue_by_domain_shares_one_queue_and_one_delay_across_its_hosts() -> None:
    h = hosts(delay=1.0, queue_by="domain")
    queue(h, "http://www.example.com/a", "http://img.example.com:8080/b", "http://other.org/c")
    assert sorted(h.hosts) == ["example.com", "other.org"]
    steps = [(0.0, "http://www.example.com/a"), (0.0, "http://other.org/c"), (0.5, None),
             (1.0, "http://img.example.com:8080/b")]
    assert timeline(h, steps, CHECKS) == [url for _, url in steps]


def test_the_sitemap_probe_takes_one_of_the_hosts_turns() -> None:
    """As the crawler does it (Crawler._prerequisite): the probe goes out on the turn of the
    URL taken, which goes back first in its queue and waits the delay after the probe."""
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://site/b")
    got = h.take(0.0)
    assert got is not None
    host = got[1]
    h.finished(host)
    h.want_probe(host)
    probe = h.take(1.0)
    assert probe is not None and probe[0].url == "http://site/b" and host.flags & STEP_PENDING
    host.flags &= ~NEEDS_PROBE  # the crawler, as it sends the probe
    h.started(host, 1.0)
    h.untake(host, probe[0])
    assert timeline(h, [(1.0, None), (1.999, None), (2.0, "")]) == [None, None, "http://site/b"]


def test_the_per_host_cap_holds_until_a_fetch_finishes() -> None:
    h = hosts(per_host=2)
    queue(h, *(f"http://site/{i}" for i in range(4)))
    first, second = h.take(0.0), h.take(0.0)
    assert first is not None and second is not None and h.take(0.0) is None
    assert first[1].in_flight == 2 and h.next_wake(PAGES) is None  # capped: out of the order
    h.finished(first[1])
    assert taken(h, 0.0) == "http://site/2" and h.take(0.0) is None


# -- back-off, Retry-After, strikes, retirement --------------------------------------------
@pytest.mark.parametrize(("retry_after", "failures", "until"), [
    (None, 1, 100.5), (None, 2, 101.0), (None, 3, 102.0), (None, 9, 160.0),  # 0.5 doubling, at most 60
    (10.0, 1, 110.0), (0.0, 1, 100.0), (3600.0, 1, 160.0),
])
def test_a_failure_backs_the_whole_host_off(retry_after, failures, until) -> None:
    h = hosts(backoff=0.5, max_backoff=60.0, max_failures=100)
    queue(h, "http://site/a", "http://site/b")
    host = h.of("http://site/a")
    h.answered(host)
    for i in range(1, failures):  # earlier failures, each after the last back-off began
        h.failed(host, "503", float(i), float(i), block=True, strike=False)
    assert not h.failed(host, "429", 100.0, 100.0, retry_after, strike=False)
    assert host.failures == failures and host.backoff_until == until and host.why == "429"
    if until > 100.0:
        assert host.state(100.0) == "backoff" and taken(h, until - 0.001) is None
        assert h.next_wake(PAGES) == until  # moved back in line by that take()
    assert taken(h, until) == "http://site/a"


def test_a_failure_of_a_request_sent_before_the_back_off_began_says_nothing_new() -> None:
    h = hosts(backoff=1.0, max_failures=3)
    queue(h, "http://site/a")
    host = h.of("http://site/a")
    h.answered(host)
    assert not h.failed(host, "connect", 10.0, 10.0)
    assert (host.failures, host.strikes, host.backoff_until) == (1, 1, 11.0)
    for started in (9.0, 9.5, 9.999):  # in flight when the block began: a backlog, not news
        assert not h.failed(host, "connect", started, 10.5)
    assert (host.failures, host.strikes, host.backoff_until, host.last_error) == (1, 1, 11.0, "connect")
    assert not h.failed(host, "connect", 10.0, 12.0)  # started as the block began: news
    assert (host.failures, host.strikes, host.backoff_until) == (2, 2, 14.0)


def test_a_success_ends_the_count_but_not_the_block_in_force() -> None:
    h = hosts(backoff=1.0)
    queue(h, "http://site/a")
    host = h.of("http://site/a")
    h.failed(host, "timeout", 10.0, 10.0)
    h.succeeded(host, 9.0, 0.1)  # started before the block: says nothing about the host since
    assert (host.failures, host.strikes, host.why) == (1, 1, "timeout")
    h.succeeded(host, 10.5, 0.1)
    assert (host.failures, host.strikes, host.why) == (0, 0, "") and host.flags & ANSWERED
    assert host.backoff_until == 11.0 and host.state(10.6) == "backoff"  # a promise is kept


@pytest.mark.parametrize(("answered", "max_failures", "retired_at"), [
    (True, 5, 5), (True, 3, 3), (False, 5, NEVER_ANSWERED_STRIKES), (False, 1, 1),
])
def test_strikes_in_a_row_retire_the_host(answered, max_failures, retired_at) -> None:
    h = hosts(max_failures=max_failures, backoff=0.0)
    queue(h, "http://site/a")
    host = h.of("http://site/a")
    if answered:
        h.answered(host)
    said = [h.failed(host, "connect", float(t), float(t)) for t in range(1, retired_at + 1)]
    assert said == [False] * (retired_at - 1) + [True]


def test_a_rate_limit_backs_off_but_never_strikes() -> None:
    h = hosts(max_failures=2, backoff=0.0)
    queue(h, "http://site/a")
    host = h.of("http://site/a")
    h.answered(host)
    assert [h.failed(host, "429", float(t), float(t), 0.0, strike=False) for t in range(1, 10)] == [False] * 9
    assert host.strikes == 0 and host.failures == 9


def test_a_host_with_strikes_gets_one_request_at_a_time() -> None:
    h = hosts(per_host=4, backoff=0.0)
    queue(h, *(f"http://site/{i}" for i in range(4)))
    host = h.of("http://site/0")
    h.answered(host)
    assert taken(h, 0.0) == "http://site/0" and taken(h, 0.0) == "http://site/1"
    h.failed(host, "timeout", 0.0, 1.0)
    h.finished(host)
    assert host.in_flight == 1 and taken(h, 2.0) is None  # one in flight already: capped at 1
    h.finished(host)
    assert taken(h, 2.0) == "http://site/2" and taken(h, 2.0) is None


def test_a_retired_hosts_urls_come_due_at_once_for_their_records() -> None:
    h = hosts(delay=10.0)
    queue(h, "http://site/a", "http://site/b", "http://site/c")
    got = h.take(0.0)
    assert got is not None
    host = got[1]
    assert h.retire(host, "dns") == 2 and h.retire(host, "dns") == 0  # once
    assert host.flags & RETIRED and host.last_error == "dns" and h.retired == 1
    assert [taken(h, 0.0), taken(h, 0.0), taken(h, 0.0)] == ["http://site/b", "http://site/c", None]
    assert host.in_flight == 1  # only the URL fetched before; the others go to their Records
    assert h.counts(0.0)["retired"] == 1


# -- budgets, pause and resume, delays set live, robots.txt, Crawl-delay, adaptive ---------
def test_a_budget_admits_so_many_urls_per_host_and_counts_the_rest() -> None:
    h = hosts(budget=2)
    assert [h.admit(Item(f"http://site/{i}", 0, 0)) for i in range(4)] == [True, True, False, False]
    assert h.within_budget("http://site2/x") is not None and h.within_budget("http://site2/y") is not None
    assert h.within_budget("http://site2/z") is None
    site = h.of("http://site/")
    assert (site.admitted, site.over, h.over_budget, h.size) == (2, 2, 3, 2)
    assert taken(h, 0.0) == "http://site/0" and taken(h, 0.0) == "http://site/1"
    h.finished(site)
    h.finished(site)
    assert site.state(0.0) == "budget"


def test_a_paused_host_is_never_due_until_resumed() -> None:
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://site/b", "http://site2/c")
    assert h.pause("site") and not h.pause("site")
    assert h.paused() == {"site": 2} and h.of("http://site/a").state(0.0) == "paused"
    assert timeline(h, [(0.0, ""), (0.0, "")]) == ["http://site2/c", None]
    assert h.next_wake(PAGES) is None
    assert h.resume("site") == 2 and h.resume("site") == -1 and h.resume("nowhere") == -1
    assert taken(h, 0.0) == "http://site/a"


def test_a_live_delay_moves_the_next_allowed_time_from_the_last_start() -> None:
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://site/b")
    assert taken(h, 100.0) == "http://site/a"
    host = h.set_live_delay("site", 3.0)
    assert (host.delay, host.source, host.next_at) == (3.0, "live", 103.0)
    assert taken(h, 102.9) is None and h.next_wake(PAGES) == 103.0
    h.set_live_delay("site", None)
    assert (host.delay, host.source, host.next_at) == (1.0, "delay", 101.0)
    h.set_live_delay("site", 0.5)  # shorter than --delay: the longer rules
    assert (host.delay, host.source) == (1.0, "delay")
    assert taken(h, 101.0) == "http://site/b"


def test_robots_txt_comes_first_and_holds_the_host_until_it_is_done() -> None:
    h = hosts(robots=True)
    queue(h, "http://site/a", "http://site/b")
    got = h.take(0.0)
    assert got is not None
    host = got[1]
    assert host.flags & NEEDS_ROBOTS and host.flags & STEP_PENDING
    assert h.take(0.0) is None  # no cap, yet the host waits for its robots.txt
    host.flags &= ~NEEDS_ROBOTS  # what the crawler does as it fetches robots.txt
    h.set_crawl_delay(host, 2.0, 0.5)  # Crawl-delay: 2, the fetch started at 0.5
    h.untake(host, got[0])  # the URL goes back first; the slot frees
    assert (host.delay, host.source, host.next_at) == (2.0, "robots", 2.5)
    assert not host.flags & STEP_PENDING and taken(h, 2.4) is None
    assert taken(h, 2.5) == "http://site/a"


def test_the_adaptive_delay_follows_the_last_response_time() -> None:
    h = hosts(delay=0.1, delay_factor=2.0)
    queue(h, "http://site/a", "http://site/b")
    got = h.take(10.0)
    assert got is not None
    host = got[1]
    h.succeeded(host, 10.0, 0.5)
    h.finished(host)
    assert (host.delay, host.source, host.next_at) == (1.0, "adaptive", 11.0)
    assert taken(h, 10.9) is None and taken(h, 11.0) == "http://site/b"


# -- the two lanes, deferred retries, the states --------------------------------------------
def test_each_lane_has_its_own_order_and_a_deferred_retry_counts_for_both() -> None:
    h = hosts(delay=1.0)
    queue(h, "http://site/a", "http://far/x")
    assert taken(h, 0.0, PAGES) == "http://site/a" and taken(h, 0.0, PAGES) is None
    assert taken(h, 0.0, CHECKS) == "http://far/x"
    assert (h.next_wake(PAGES), h.next_wake(CHECKS)) == (None, None)  # both empty now
    h.defer(Item("http://site/a", 0, 0, 1), 5.0)
    assert h.size == 1 and h.next_wake(PAGES) == 5.0 and h.next_wake(CHECKS) == 5.0
    assert taken(h, 4.9) is None and taken(h, 5.0, CHECKS) is None  # back in its host's queue...
    assert taken(h, 5.0, PAGES) == "http://site/a" and h.size == 0  # ...of the pages lane


def test_a_hosts_state_at_each_moment() -> None:
    h = hosts(delay=1.0, backoff=2.0, budget=1)
    queue(h, "http://site/a")
    host: Host = h.of("http://site/a")
    assert host.state(0.0) == "ready"
    assert h.take(10.0) is not None
    assert host.state(10.0) == "fetching"
    h.finished(host)
    assert host.state(10.0) == "done" and h.admit(Item("http://site/b", 0, 0)) is False
    assert host.state(10.0) == "budget"
    h.put(host, Item("http://site/a", 0, 0, 1), front=True)  # a retry: back first in the queue
    assert host.state(10.5) == "waiting" and host.wake(10.5) == 0.5 and host.state(11.0) == "ready"
    h.failed(host, "503", 11.0, 11.0)
    assert host.state(12.9) == "backoff" and host.wake(12.0) == 1.0 and host.state(13.0) == "ready"
    h.pause("site")
    assert host.state(13.0) == "paused" and host.parked == 1
    h.retire(host, "")
    assert host.state(13.0) == "retired"
    assert h.counts(13.0) == {"ready": 0, "fetching": 0, "waiting": 0, "backoff": 0, "paused": 0, "budget": 0,
                              "retired": 1, "done": 0}


# -- the in-memory frontier on the same clock ------------------------------------------------
def frontier(now: list[float], **policy: object) -> MemoryFrontier:
    f = MemoryFrontier()
    f.hosts.configure(Politeness(**policy))  # type: ignore[arg-type]
    f.hosts.jitter = lambda: 1.0
    f.hosts.sort_into_lanes(lambda url: "://site" not in url)
    f.clock = lambda: now[0]
    return f


async def test_the_frontier_hands_out_due_urls_by_its_clock() -> None:
    now = [100.0]
    f = frontier(now, delay=1.0)
    for url in ("http://site/a", "http://site/b", "http://site/c"):
        assert f.add(Item(url, 0, 0))
    assert not f.add(Item("http://site/a", 0, 0))  # seen
    assert (f.size, f.seen_count, f.next_wake_in()) == (3, 3, 0.0)
    a = await f.pop()
    assert a.url == "http://site/a" and f.next_wake_in() == 1.0
    now[0] = 100.75
    assert f.next_wake_in() == 0.25 and [i.url for i in f.peek(5)] == ["http://site/b", "http://site/c"]
    now[0] = 101.0
    b = await f.pop()
    assert b.url == "http://site/b"
    f.requeue(b, after=5.0)  # its own back-off: due at 106, its host at 102 meanwhile
    f.done(b)
    assert f.size == 2 and f.next_wake_in() == 1.0
    now[0] = 102.0
    assert (await f.pop()).url == "http://site/c"
    assert f.next_wake_in() == 4.0
    now[0] = 106.0
    again = await f.pop()
    assert again.url == "http://site/b" and again.tries == 0 and f.size == 0


async def test_a_waiting_pop_is_woken_by_a_due_url_of_its_own_lane_only() -> None:
    now = [50.0]
    f = frontier(now)
    loop = asyncio.get_running_loop()
    pages = asyncio.ensure_future(f.pop(PAGES))
    loop.call_soon(f.add, Item("http://far/x", 0, 0))  # once both pops wait: a check
    check = await f.pop(CHECKS)
    assert check.url == "http://far/x" and not pages.done()  # the page worker slept on
    loop.call_soon(f.add, Item("http://site/a", 0, 0))
    assert (await asyncio.wait_for(pages, 5)).url == "http://site/a"
    assert f.next_wake_in() is None


async def test_the_frontier_joins_when_every_url_is_done() -> None:
    now = [0.0]
    f = frontier(now)
    for url in ("http://site/a", "http://far/x"):
        f.add(Item(url, 0, 0))
    items = [await f.pop(PAGES), await f.pop(CHECKS)]
    join = asyncio.ensure_future(f.join())
    f.done(items[0])
    assert not join.done()
    f.done(items[1])
    await asyncio.wait_for(join, 5)
    with pytest.raises(ValueError):
        f.done(items[1])
