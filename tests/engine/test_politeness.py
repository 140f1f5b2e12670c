"""The politeness policy as arithmetic (core/queueing/politeness.py): each rule a table of
rows, each row its inputs and the exact answer. No sockets, no clock but the numbers here;
the same rules in Redis's Lua are held to these functions in tests/cluster/test_cluster_policy.py."""
from __future__ import annotations

import dataclasses

import pytest

from crawltop.core.queueing import politeness as rules
from crawltop.core.queueing.politeness import JITTER, NEVER_ANSWERED_STRIKES, Politeness

P = Politeness()


@pytest.mark.parametrize(("policy", "crawl", "adaptive", "live", "expected"), [
    (P, 0.0, 0.0, None, (0.0, "")),  # nothing sets it
    (Politeness(delay=1.0), 0.0, 0.0, None, (1.0, "delay")),
    (Politeness(delay=1.0), 2.0, 0.0, None, (2.0, "robots")),
    (Politeness(delay=1.0), 1.0, 0.0, None, (1.0, "delay")),  # a tie stays with --delay
    (Politeness(delay=1.0, max_crawl_delay=5.0), 100.0, 0.0, None, (5.0, "robots (capped)")),
    (Politeness(delay=6.0, max_crawl_delay=5.0), 100.0, 0.0, None, (6.0, "delay")),  # capped below --delay
    (Politeness(max_crawl_delay=5.0), 5.0, 0.0, None, (5.0, "robots")),  # at the cap: not capped
    (Politeness(delay=1.0), 2.0, 3.0, None, (3.0, "adaptive")),
    (Politeness(delay=1.0), 3.0, 3.0, None, (3.0, "robots")),  # a tie stays with robots.txt
    (Politeness(delay=1.0), 2.0, 3.0, 0.5, (3.0, "adaptive")),  # a shorter live delay is outvoted
    (Politeness(delay=1.0), 2.0, 3.0, 3.0, (3.0, "live")),  # a live delay wins a tie
    (Politeness(delay=1.0), 2.0, 3.0, 4.0, (4.0, "live")),
    (P, 0.0, 0.0, 0.0, (0.0, "live")),  # a live 0 says so
])
def test_the_delay_is_the_largest_of_its_sources(policy, crawl, adaptive, live, expected) -> None:
    assert rules.delay_of(policy, crawl, adaptive, live) == expected


@pytest.mark.parametrize(("delay", "source", "live", "expected"), [
    (1.0, "delay", None, (1.0, "delay")),
    (1.0, "delay", 0.5, (1.0, "delay")),
    (1.0, "robots", 1.0, (1.0, "live")),
    (1.0, "adaptive", 2.5, (2.5, "live")),
])
def test_a_live_delay_rules_when_it_is_at_least_as_long(delay, source, live, expected) -> None:
    assert rules.with_live(delay, source, live) == expected


@pytest.mark.parametrize(("delay", "source"), [(0.0, ""), (0.25, "delay")])
def test_the_plain_source_names_the_crawls_delay(delay, source) -> None:
    assert rules.plain_source(delay) == source


@pytest.mark.parametrize(("factor", "latency", "expected"), [(0.0, 2.0, 0.0), (2.0, 0.1, 0.2), (3.0, 1.5, 4.5)])
def test_the_adaptive_delay_is_the_factor_times_the_latency(factor, latency, expected) -> None:
    assert rules.adaptive_delay(Politeness(delay_factor=factor), latency) == expected


@pytest.mark.parametrize(("next_at", "old", "new", "expected"), [
    (0.0, 0.0, 5.0, 0.0),  # never taken: due at once whatever the delay
    (101.0, 1.0, 3.0, 103.0),  # longer: the gap already waited counts
    (103.0, 3.0, 1.0, 101.0),  # shorter: due sooner
    (101.0, 1.0, 1.0, 101.0),
])
def test_a_changed_delay_counts_from_the_last_start(next_at, old, new, expected) -> None:
    assert rules.moved_by_delay(next_at, old, new) == expected


@pytest.mark.parametrize(("started", "delay", "next_at", "expected"), [
    (100.0, 0.0, 0.0, 0.0),  # no delay: nothing moves
    (100.0, 2.0, 0.0, 102.0),
    (100.0, 2.0, 105.0, 105.0),  # a later time set already (a Crawl-delay, a later start) stays
    (100.0, 2.0, 101.0, 102.0),
    (100.0, 2.0, 102.0, 102.0),
])
def test_the_gap_counts_from_a_requests_start(started, delay, next_at, expected) -> None:
    assert rules.gap_after(started, delay, next_at) == expected


@pytest.mark.parametrize(("next_at", "until", "expected"), [(0.0, 0.0, 0.0), (5.0, 3.0, 5.0), (5.0, 9.0, 9.0)])
def test_a_host_is_due_when_its_delay_and_its_back_off_are_both_over(next_at, until, expected) -> None:
    assert rules.due_at(next_at, until) == expected


@pytest.mark.parametrize(("per_host", "one", "strikes", "answered", "expected"), [
    (None, False, 0, False, None),  # no cap
    (4, False, 0, False, 4),
    (4, True, 0, False, 1),  # never answered: one at a time
    (4, True, 0, True, 4),
    (None, True, 0, True, None),
    (4, False, 1, True, 1),  # stopped answering: one at a time until it does
    (None, True, 3, False, 1),
])
def test_the_cap_is_one_for_a_host_that_never_or_no_longer_answers(per_host, one, strikes, answered,
                                                                    expected) -> None:
    policy = Politeness(per_host=per_host, one_until_answered=one)
    assert rules.cap_of(policy, strikes, answered) == expected


@pytest.mark.parametrize(("started", "block_at", "news"), [(10.0, 0.0, True), (10.0, 10.0, True), (9.999, 10.0, False)])
def test_only_a_request_started_since_the_back_off_began_is_news(started, block_at, news) -> None:
    assert rules.is_news(started, block_at) is news


B = Politeness(backoff=0.5, max_backoff=60.0)


@pytest.mark.parametrize(("policy", "failures", "retry_after", "expected"), [
    (B, 1, None, 0.5),
    (B, 2, None, 1.0),
    (B, 3, None, 2.0),
    (B, 8, None, 60.0),  # 64 s: capped
    (B, 1, 10.0, 10.0),  # the server's Retry-After
    (B, 5, 0.0, 0.0),  # Retry-After: 0 is no wait at all
    (B, 1, 3600.0, 60.0),  # an hour asked: the longest accepted
    (Politeness(backoff=0.05, max_backoff=1.0), 4, None, 0.4),
])
def test_the_back_off_is_retry_after_else_doubling(policy, failures, retry_after, expected) -> None:
    assert rules.backoff_wait(policy, failures, retry_after) == expected


@pytest.mark.parametrize(("failures", "now", "until", "retry_after", "jitter", "expected"), [
    (1, 100.0, 0.0, None, 1.0, 100.5),
    (3, 100.0, 0.0, None, 1.1, 102.2),
    (1, 100.0, 0.0, 2.0, 1.0, 102.0),
    (1, 100.0, 130.0, 2.0, 1.0, 130.0),  # a longer back-off in force is kept: a promise
    (2, 100.0, 100.5, None, 1.0, 101.0),
])
def test_the_back_off_ends_its_wait_from_now(failures, now, until, retry_after, jitter, expected) -> None:
    assert rules.backoff_until(B, failures, now, until, retry_after, jitter) == pytest.approx(expected, abs=1e-12)


def test_the_random_jitter_stays_within_its_bound() -> None:
    draws = [rules.random_jitter() for _ in range(2000)]
    assert min(draws) >= 1.0 and max(draws) <= 1.0 + JITTER
    assert max(draws) - min(draws) > JITTER / 2  # spread, not a constant


@pytest.mark.parametrize(("max_failures", "answered", "strikes", "limit", "retired"), [
    (5, True, 4, 5, False),
    (5, True, 5, 5, True),
    (5, False, 1, NEVER_ANSWERED_STRIKES, False),
    (5, False, 2, NEVER_ANSWERED_STRIKES, True),  # never answered: retired sooner
    (1, False, 1, 1, True),  # --host-max-failures lower still rules
    (3, True, 2, 3, False),
])
def test_strikes_retire_a_host_sooner_if_it_never_answered(max_failures, answered, strikes, limit, retired) -> None:
    policy = dataclasses.replace(P, max_failures=max_failures)
    assert rules.strike_limit(policy, answered) == limit
    assert rules.retires(policy, strikes, answered) is retired
