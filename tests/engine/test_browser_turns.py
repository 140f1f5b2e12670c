"""A tab's requests wait for their hosts' turns (core/fetching/tabturns.py), in the crawl's own
scheduler (core/queueing/hosts.py): no browser here, the turns alone, on the loop's clock."""
from __future__ import annotations

import asyncio

from crawltop.core.fetching.tabturns import Turn, Turns
from crawltop.core.queueing.hosts import Hosts
from crawltop.core.queueing.politeness import Politeness

PAGE = "http://site.test/"


def _turns(**policy: object) -> tuple[Turns, Hosts]:
    hosts = Hosts(Politeness(**policy))  # type: ignore[arg-type]
    turns = Turns(max_wait=60.0)
    turns.hosts = hosts
    return turns, hosts


async def test_each_turn_waits_for_the_hosts_gap_and_gives_the_unused_one_back() -> None:
    turns, hosts = _turns(delay=0.3)
    clock = asyncio.get_running_loop().time
    first = await turns.take(PAGE + "a.png", PAGE, clock() + 30)
    assert isinstance(first, Turn)
    turns.done(first, 200)
    asked = clock()
    second = await turns.take(PAGE + "b.png", PAGE, clock() + 30)
    assert isinstance(second, Turn) and clock() - first.started >= 0.3 and clock() - asked > 0.1
    before = hosts.of(PAGE).next_at
    turns.unused(second)  # nothing went out: its gap is not spent
    assert hosts.of(PAGE).next_at < before and hosts.of(PAGE).in_flight == 0


async def test_the_pages_slot_is_lent_to_its_tab_and_a_late_turn_is_refused() -> None:
    """--per-host 1: the page's worker holds the host's slot; its tab's requests there go one
    at a time in it, another host's wait for their own; a turn past `until` is not waited for."""
    turns, hosts = _turns(per_host=1)
    hosts.of(PAGE).in_flight = 1  # the page's own fetch, in flight for the whole tab
    clock = asyncio.get_running_loop().time
    first = await turns.take(PAGE + "a.png", PAGE, clock() + 30)
    assert isinstance(first, Turn)
    waiting = asyncio.ensure_future(turns.take(PAGE + "b.png", PAGE, clock() + 30))
    await asyncio.sleep(0)  # it runs up to its wait: the one slot is the first request's
    assert not waiting.done()
    turns.done(first, 200)
    second = await asyncio.wait_for(waiting, 5)
    assert isinstance(second, Turn) and hosts.of(PAGE).in_flight == 2
    late = await turns.take(PAGE + "c.png", PAGE, clock() + 0.05)  # the slot is taken past `until`
    assert late is False
    other = await turns.take("http://cdn.test/x.js", PAGE, clock() + 30)  # its own slot, free
    assert isinstance(other, Turn)


async def test_a_429_backs_the_host_off_for_the_next_turn() -> None:
    turns, hosts = _turns()
    clock = asyncio.get_running_loop().time
    first = await turns.take(PAGE + "a.png", PAGE, clock() + 30)
    assert isinstance(first, Turn)
    turns.done(first, 429, "2")
    assert hosts.of(PAGE).backoff_until >= clock() + 1.5
    assert await turns.take(PAGE + "b.png", PAGE, clock() + 0.5) is False  # its turn is 2 s away


async def test_without_the_crawls_scheduler_a_request_goes_at_once() -> None:
    turns = Turns(max_wait=60.0)  # a crawl on Redis: its hosts live there
    assert await turns.take(PAGE + "a.png", PAGE, 0.0) is True
