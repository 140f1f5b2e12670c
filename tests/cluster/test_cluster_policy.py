"""The politeness policy in Redis's Lua (core/cluster/scripts.py), held to its statement in
Python (core/queueing/politeness.py) row by row: a real redis-server, each script called as
a crawl calls it (RedisFrontier.std_keys/std_args) but with the time passed in (`now_ms`),
so each row's answer is exact to the millisecond. Units are Redis's: every time and delay
in ms, so the Python side is given a policy in ms too (the formulas are unit-free).

The one formula with no Python twin is the Lua back-off's jitter: a script takes it from
the time (`1 + (now % 101) / 1010`), where Python draws it (politeness.random_jitter);
both stay within 1 to 1 + JITTER, which a row checks."""
from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from crawltop.core.cluster import scripts
from crawltop.core.cluster.frontier import RedisFrontier
from crawltop.core.cluster.keys import Keys, encode_item
from crawltop.core.cluster.seen import fingerprint
from crawltop.core.queueing import politeness as rules
from crawltop.core.queueing.hosts import CHECKS, PAGES
from crawltop.core.queueing.item import Item
from crawltop.core.queueing.politeness import JITTER, Politeness

NOW = 1_700_000_000_000  # ms: a time of the order the server's clock gives


def lua_jitter(now: int) -> float:
    """DONE's jitter for a back-off computed at `now` (ms), as its Lua writes it."""
    return 1 + (now % 101) / 1010


def in_ms(policy: Politeness) -> Politeness:
    """The policy as the scripts receive it: times in ms (std_args rounds them so)."""
    return Politeness(delay=round(policy.delay * 1000), per_host=policy.per_host,
                      max_crawl_delay=round(policy.max_crawl_delay * 1000), delay_factor=policy.delay_factor,
                      max_failures=policy.max_failures, backoff=round(policy.backoff * 1000),
                      max_backoff=round(policy.max_backoff * 1000), one_until_answered=policy.one_until_answered)


class Lua:
    """The host scripts on one crawl, called with the time given."""

    def __init__(self, r: aioredis.Redis, name: str) -> None:
        self.r, self.k = r, Keys(name)
        self.f = RedisFrontier(r, self.k, "proc-1")
        self.pop, self.done = r.register_script(scripts.POP), r.register_script(scripts.DONE)
        self.add, self.hostctl = r.register_script(scripts.ADD), r.register_script(scripts.HOSTCTL)

    def rules(self, policy: Politeness) -> None:
        self.f.hosts.configure(policy)

    async def run(self, script, now: int, *own: object) -> list:
        return await script(keys=self.f.std_keys(), args=self.f.std_args(*own, now_ms=now))

    async def event(self, now: int, kind: str, host: str, ago: int = 0, b: int = 0, c: int = 0,
                    why: str = "") -> None:
        """One host event in a DONE batch of no URLs."""
        await self.run(self.done, now, 1, kind, host, ago, b, c, why)

    async def host(self, host: str) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in (await self.r.hgetall(self.k.h(host))).items()}

    async def queue(self, now: int, host: str, *urls: str, lane: int = PAGES) -> None:
        args: list[object] = []
        for url in urls:
            args += (fingerprint(url), host, lane, encode_item(Item(url, 0, 0)))
        await self.run(self.add, now, *args)


@pytest.fixture
async def lua(redis_url) -> AsyncIterator[Lua]:
    r = aioredis.Redis.from_url(redis_url)
    lua = Lua(r, "policy")
    await r.hset(lua.k.meta, mapping={"status": "running"})
    yield lua
    await r.aclose()


# -- the delay: recompute (HOSTCTL 'delay') and delay_of -----------------------------------
DELAYS = [  # (--delay s, --max-crawl-delay s, Crawl-delay ms, adaptive ms, live ms or None)
    (0.0, 30.0, 0, 0, None),
    (0.2, 30.0, 0, 0, None),
    (0.2, 30.0, 1500, 0, None),
    (0.2, 1.0, 100_000, 0, None),  # capped
    (2.0, 1.0, 100_000, 0, None),  # capped below --delay
    (0.2, 30.0, 1500, 1500, None),  # a tie stays with robots.txt
    (0.2, 30.0, 1500, 1600, None),
    (0.2, 30.0, 1500, 1600, 1600),  # a live delay wins a tie
    (0.2, 30.0, 1500, 1600, 100),  # a short live delay is outvoted
    (0.0, 30.0, 0, 0, 0),
    (0.5, 30.0, 0, 0, 500),
]


async def test_the_delay_is_the_largest_of_its_sources_in_both(lua) -> None:
    for i, (delay, max_cd, cd, ad, live) in enumerate(DELAYS):
        policy = Politeness(delay=delay, max_crawl_delay=max_cd)
        lua.rules(policy)
        host = f"d{i}.test"
        await lua.r.hset(lua.k.h(host), mapping={"cd": cd, "ad": ad})
        await lua.run(lua.hostctl, NOW, "delay", host, "" if live is None else live)
        row = await lua.host(host)
        expected = rules.delay_of(in_ms(policy), cd, ad, live)
        assert (int(row["d"]), row["src"]) == expected, (i, DELAYS[i])


# -- the gap: `g` events and gap_after ---------------------------------------------------------
GAPS = [  # (delay ms in h:HOST or None: the crawl's, --delay s, next-allowed before, ms ago)
    (None, 0.0, 0, 0),  # no delay: nothing moves
    (None, 0.3, 0, 0),
    (None, 0.3, 0, 120),  # it went out 120 ms ago: the gap counts from then
    (1000, 0.3, 0, 0),  # the host's own delay rules
    (1000, 0.3, NOW + 5000, 0),  # a later time set already stays
    (1000, 0.3, NOW + 900, 50),
]


async def test_the_gap_counts_from_a_requests_start_in_both(lua) -> None:
    for i, (own, delay, n, ago) in enumerate(GAPS):
        lua.rules(Politeness(delay=delay))
        host = f"g{i}.test"
        if own is not None:
            await lua.r.hset(lua.k.h(host), "d", own)
        await lua.r.hset(lua.k.h(host), "n", n)
        await lua.event(NOW, "g", host, ago)
        d = own if own is not None else round(delay * 1000)
        assert int((await lua.host(host))["n"]) == rules.gap_after(NOW - ago, d, n), (i, GAPS[i])


# -- the back-off: `f` events, backoff_until, is_news, strike_limit ----------------------------
FAILURES = [  # (x before, u before, the block began ms ago (None: never), Retry-After ms or -1, block,
    #            strike, the request went out ms ago, answered, --host-max-failures)
    (0, 0, None, -1, True, True, 0, True, 5),
    (1, NOW - 10, 500, -1, True, True, 0, True, 5),
    (3, 0, 500, -1, True, True, 100, True, 5),
    (9, 0, None, -1, True, True, 0, True, 20),  # 0.5 s doubled 9 times: capped at max_backoff
    (0, 0, None, 10_000, True, False, 0, True, 5),  # a Retry-After
    (0, 0, None, 3_600_000, True, False, 0, True, 5),  # an hour asked: the longest accepted
    (0, NOW + 90_000, 1, 2000, True, False, 0, True, 5),  # a longer back-off in force is kept
    (2, NOW + 900, 100, -1, True, True, 101, True, 5),  # sent before the block began: no news
    (2, NOW + 900, 100, -1, True, True, 100, True, 5),  # sent as it began: news
    (0, 0, None, -1, False, True, 0, True, 5),  # a strike without a block (a timeout of one URL)
    (1, 0, None, -1, True, True, 0, False, 5),  # never answered: the second strike retires
    (1, 0, None, -1, True, True, 0, True, 5),
    (4, 0, None, -1, True, True, 0, True, 5),  # the fifth in a row retires
    (4, 0, 10, -1, True, True, 11, True, 5),  # ...unless it is no news
    (0, 0, None, -1, True, True, 0, False, 1),  # --host-max-failures 1 rules over the two
    (0, 0, None, 0, True, False, 0, True, 5),  # Retry-After: 0
]


async def test_a_failure_backs_off_and_strikes_in_both(lua) -> None:
    for i, (x, u, began, retry, block, strike, ago, answered, max_failures) in enumerate(FAILURES):
        policy = Politeness(backoff=0.5, max_backoff=60.0, max_failures=max_failures)
        lua.rules(policy)
        host, now = f"f{i}.test", NOW + i  # a time of its own each: the jitter differs
        b = 0 if began is None else now - began
        await lua.r.hset(lua.k.h(host), mapping={"x": x, "k": x, "u": u, "b": b, **({"an": 1} if answered else {})})
        await lua.event(now, "f", host, ago, retry, int(block) + 2 * int(strike), "why")
        row = await lua.host(host)
        ms = in_ms(policy)
        news = rules.is_news(now - ago, b)
        failures = x + int(block and news)
        strikes = x + int(strike and news)
        if block and news:  # the jitter: Lua's from the time, Python's a number it is given
            after = None if retry < 0 else retry
            wait = math.floor(rules.backoff_wait(ms, failures, after) * lua_jitter(now))
            until = rules.backoff_until(ms, failures, now, u, after, lua_jitter(now))
            assert int(row["u"]) == max(u, now + wait) and math.floor(until) == int(row["u"]), (i, FAILURES[i])
            assert int(row["b"]) == now and row["w"] == "why"
        else:
            assert int(row["u"]) == u and int(row["b"]) == b, (i, FAILURES[i])
        assert (int(row["x"]), int(row["k"])) == (failures, strikes), (i, FAILURES[i])
        retired = strike and news and rules.retires(ms, strikes, answered)
        assert (row.get("r") == "1") == retired, (i, FAILURES[i], row)
        assert row["le"] == "why"


def test_the_lua_jitter_stays_within_the_pythons_bound() -> None:
    factors = [lua_jitter(NOW + i) for i in range(101)]
    assert min(factors) == 1.0 and max(factors) < 1.0 + JITTER


SUCCESSES = [  # (x, k before, b before, ms ago, --delay-factor, latency ms)
    (2, 2, NOW - 100, 50, 0.0, 80),  # started since the block began: the count ends
    (2, 2, NOW - 100, 150, 0.0, 80),  # started before it: says nothing about the host since
    (2, 2, NOW - 100, 100, 0.0, 80),  # started as it began: news
    (0, 0, 0, 0, 2.0, 300),  # the adaptive delay: factor x latency
    (1, 0, NOW, 0, 3.0, 1234),
]


async def test_a_success_ends_the_count_and_sets_the_adaptive_delay_in_both(lua) -> None:
    for i, (x, k, b, ago, factor, latency) in enumerate(SUCCESSES):
        policy = Politeness(delay=0.1, delay_factor=factor)
        lua.rules(policy)
        host = f"s{i}.test"
        await lua.r.hset(lua.k.h(host), mapping={"x": x, "k": k, "b": b, "w": "503"})
        await lua.event(NOW, "s", host, ago, latency)
        row = await lua.host(host)
        reset = rules.is_news(NOW - ago, b)
        assert (int(row["x"]), int(row["k"])) == ((0, 0) if reset else (x, k)), (i, SUCCESSES[i])
        assert row["an"] == "1" and row["ok"] == "1"
        if factor:
            adaptive = math.floor(rules.adaptive_delay(policy, latency))
            assert int(row["ad"]) == adaptive
            assert (int(row["d"]), row["src"]) == rules.delay_of(in_ms(policy), 0, adaptive, None), (i, row)


# -- the cap and the due time: schedule() and cap_of / due_at -----------------------------------
CAPS = [  # (--per-host, one_until_answered, strikes, answered, in flight, n, u)
    (None, False, 0, False, 5, 0, 0),  # no cap
    (2, False, 0, True, 1, NOW + 10, 0),
    (2, False, 0, True, 2, 0, 0),  # at its cap: out of the order
    (2, True, 0, False, 1, 0, 0),  # never answered: one at a time
    (2, True, 0, False, 0, 0, NOW + 7),
    (4, True, 0, True, 3, NOW + 50, NOW + 20),
    (4, False, 1, True, 1, 0, 0),  # stopped answering: one at a time
    (None, False, 2, True, 0, NOW + 3, NOW + 30),  # due when both the delay and the back-off are over
]


async def test_the_cap_and_the_due_time_in_both(lua) -> None:
    for i, (per_host, one, strikes, answered, flying, n, u) in enumerate(CAPS):
        policy = Politeness(per_host=per_host, one_until_answered=one)
        lua.rules(policy)
        host = f"c{i}.test"
        await lua.queue(NOW, host, f"http://{host}/a")
        await lua.r.hset(lua.k.h(host), mapping={"k": strikes, "f": flying, "n": n, "u": u,
                                                  **({"an": 1} if answered else {})})
        await lua.run(lua.hostctl, NOW, "resume", host)
        score = await lua.r.zscore(lua.k.ready, host)
        cap = rules.cap_of(policy, strikes, answered)
        if cap is not None and flying >= cap:
            assert score is None, (i, CAPS[i])
        else:
            assert score == rules.due_at(n, u), (i, CAPS[i], score)


async def test_a_paused_host_leaves_the_order_until_resumed(lua) -> None:
    lua.rules(Politeness(delay=1.0))
    await lua.queue(NOW, "p.test", "http://p.test/a", "http://p.test/b")
    await lua.r.hset(lua.k.h("p.test"), "n", NOW + 400)
    assert await lua.run(lua.hostctl, NOW, "pause", "p.test") == 2
    assert await lua.r.zscore(lua.k.ready, "p.test") is None
    assert (await lua.run(lua.pop, NOW + 5000, 4, 60_000, PAGES))[0] == []
    await lua.run(lua.hostctl, NOW, "resume", "p.test")
    assert await lua.r.zscore(lua.k.ready, "p.test") == NOW + 400


# -- POP on the same timeline as Hosts.take ---------------------------------------------------
async def test_pop_gives_one_url_per_delay_as_take_does(lua) -> None:
    """The timeline of tests/engine/test_schedule.py's GAP, in ms, through POP: a host with a
    delay gives one URL a call, due again a delay after; `wake` says when."""
    lua.rules(Politeness(delay=1.0))
    await lua.queue(NOW, "site", "http://site/a", "http://site/b", "http://site/c")

    async def pop(at: int) -> tuple[list[str], int]:
        out, _delays, _status, _new, _queued, _seen, wake, _taken = await lua.run(lua.pop, at, 4, 60_000, PAGES)
        return [m.decode().split('"')[1] for m in out], int(wake)

    steps = [(0, ["http://site/a"], 1000), (0, [], 1000), (999, [], 1), (1000, ["http://site/b"], 1000),
             (1500, [], 500), (2000, ["http://site/c"], -1), (9000, [], -1)]
    for at, urls, wake in steps:
        assert await pop(NOW + at) == (urls, wake), (at, urls, wake)
    assert int((await lua.host("site"))["n"]) == NOW + 2000 + 1000
    assert await lua.r.zscore(lua.k.checks, "site") is None  # the pages lane only
    got, _ = (await pop(NOW + 9000))
    assert got == [] and (await lua.run(lua.pop, NOW, 4, 60_000, CHECKS))[0] == []


# -- a browser tab's turns (TURN, TURN_END) and POP's cap --------------------------------------
async def test_a_tabs_turn_holds_a_slot_of_its_host_that_pop_sees(lua):
    """A tab's request granted by TURN holds a slot of its host for every engine: under
    --per-host 1, POP leases nothing there until TURN_END gives it back; a turn never given
    back (its engine died) is forgotten once its hold passed, and its host comes due again."""
    lua.rules(Politeness(delay=0.0, per_host=1))
    turn, end = lua.r.register_script(scripts.TURN), lua.r.register_script(scripts.TURN_END)

    async def ask(host: str, at: int, lent: int = 0, hold: int = 1000) -> list[int]:
        return [int(x) for x in await lua.run(turn, at, host, lent, "", hold)]

    async def leased(at: int) -> list[str]:
        return [m.decode().split(" ")[0] for m in (await lua.run(lua.pop, at, 4, 60_000, PAGES))[0]]

    await lua.queue(NOW, "g.test", "http://g.test/a")
    await lua.queue(NOW, "h.test", "http://h.test/a")
    assert await ask("g.test", NOW) == [1, 0, 1] and await ask("h.test", NOW) == [1, 0, 1]
    assert await leased(NOW + 10) == []  # each host's one slot held by a tab's request
    assert await ask("g.test", NOW + 10) == [0, 0, 0]  # a second tab request waits too
    await lua.run(end, NOW + 20, "g.test")  # g's given back
    assert await leased(NOW + 30) == ["g.test"]
    assert await ask("g.test", NOW + 40) == [0, 0, 0]  # the worker's fetch holds it now
    assert await ask("g.test", NOW + 40, lent=1) == [1, 0, 1]  # unless it is the tab's own page, lent
    assert await leased(NOW + 999) == []  # h's tab never gave its turn back: held until its hold passes
    assert await leased(NOW + 1001) == ["h.test"]  # then forgotten: the host due again by itself
    await lua.run(end, NOW + 1002, "h.test")  # the lost engine's late word changes nothing
    assert (await lua.host("h.test")).get("tf") == "1"
