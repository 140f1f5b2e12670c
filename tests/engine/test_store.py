"""core/storage/store.py driven directly: the SQLite frontier, record sink and settings."""
from __future__ import annotations

import asyncio
import csv
import json
import os
import sqlite3

import pytest
from support.wait import wait_until

from crawltop.core.config import CrawlConfig
from crawltop.core.errors import StateError
from crawltop.core.output.records import Record
from crawltop.core.queueing.frontier import Item
from crawltop.core.queueing.politeness import Politeness
from crawltop.core.storage import store as store_mod
from crawltop.core.storage.export import CSV_FIELDS, export_csv, export_jsonl
from crawltop.core.storage.open_state import open_state
from crawltop.core.storage.store import SCHEMA_VERSION, SqliteStore

CFG = CrawlConfig(roots=("http://a.test/",), concurrency=7, max_depth=3)


def item(n: int | str, depth: int = 1) -> Item:
    return Item(f"http://a.test/{n}", 10, depth)


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "state.db")


async def drain_all(st: SqliteStore) -> list[Item]:
    out = []
    while st.size:
        it = await st.pop()
        out.append(it)
        st.write(Record(url=it.url, status=200, depth=it.depth))
        st.done(it)
    return out


async def test_add_pop_done_fifo_and_seen(path):
    _, st = open_state(path, CFG)
    assert not st.resumed and st.resumed_records == 0
    assert st.add(item(1)) and st.add(item(2)) and st.add(item(3))
    assert not st.add(item(2))  # seen
    assert st.seen(item(2).url) and not st.seen("http://a.test/nope")
    assert st.mark_seen("http://a.test/blocked") and not st.mark_seen("http://a.test/blocked")
    assert not st.add(Item("http://a.test/blocked", 10, 1))
    assert st.size == 3 and st.seen_count == 4
    got = [await st.pop() for _ in range(3)]
    assert [g.url for g in got] == [item(i).url for i in (1, 2, 3)]
    for g in got:
        st.done(g)
    await asyncio.wait_for(st.join(), 1)
    assert st.drain() == []
    st.close()


async def test_everything_survives_close_and_reopen(path):
    _, st = open_state(path, CFG)
    for i in range(50):
        st.add(item(i))
    first = [await st.pop() for _ in range(20)]
    for it in first[:15]:
        st.write(Record(url=it.url, status=200))
        st.done(it)
    # first[15:] are in flight when we stop
    st.save_session(status="stopped", paused=True, concurrency=3)
    st.close()

    cfg, st2 = open_state(path, None, {})
    assert st2.resumed and st2.resumed_records == 15
    assert st2.recovered_in_flight == 5
    assert cfg.roots == CFG.roots and cfg.max_depth == 3
    assert cfg.concurrency == 3 and cfg.start_paused  # restored from the session
    assert st2.seen_count == 50 and st2.size == 35
    assert all(st2.seen(item(i).url) for i in range(50))
    assert not st2.add(item(7))
    rest = await drain_all(st2)
    # in-flight items come first (their original place in the queue), nothing is lost or doubled
    assert [r.url for r in rest] == [item(i).url for i in range(15, 50)]
    await asyncio.wait_for(st2.join(), 1)
    st2.flush()
    urls = [r["url"] for r in st2.records()]
    assert sorted(urls) == sorted(item(i).url for i in range(50))
    assert {r["run"] for r in st2.records()} == {1, 2}
    st2.close()


async def test_overrides_win_over_saved_settings(path):
    _, st = open_state(path, CFG)
    st.save_session(status="stopped", paused=True, concurrency=3)
    st.close()
    cfg, st = open_state(path, None, {"concurrency": 12, "start_paused": False, "max_depth": 9})
    assert (cfg.concurrency, cfg.start_paused, cfg.max_depth) == (12, False, 9)
    st.close()
    # the overridden config is what the next resume keeps
    cfg, st = open_state(path, None, {})
    assert cfg.max_depth == 9
    st.close()


async def test_new_roots_on_resume_are_added(path):
    _, st = open_state(path, CFG)
    st.close()
    cfg, st = open_state(path, CrawlConfig(roots=("http://a.test/", "http://b.test/")), {})
    assert cfg.roots == ("http://a.test/", "http://b.test/")
    st.close()


async def test_requeue_puts_item_back_and_skips_its_done(path):
    _, st = open_state(path, CFG)
    st.add(item(1))
    st.add(item(2))
    a = await st.pop()
    st.requeue(a._replace(tries=a.tries + 1))  # cancelled worker
    st.done(a)  # the worker's finally
    assert st.size == 2 and st.unfinished == 2
    again = await st.pop()  # first in its host's queue: the URL that was cut off goes next
    b = await st.pop()
    assert b.url == item(2).url and again.url == a.url and again.tries == 1
    st.done(b)
    st.done(again)
    await asyncio.wait_for(st.join(), 1)
    st.close()
    _, st = open_state(path, None)
    assert st.size == 0  # the requeued item was finished, not left queued
    st.close()


async def test_stop_keeps_requeued_in_flight_items_for_next_run(path):
    _, st = open_state(path, CFG)
    for i in range(5):
        st.add(item(i))
    held = [await st.pop() for _ in range(2)]
    for it in held:  # crawler.stop(): cancelled workers requeue, then done() in finally
        st.requeue(it._replace(tries=1))
        st.done(it)
    assert st.drain() == []
    st.close()
    _, st = open_state(path, None)
    assert st.size == 5 and st.recovered_in_flight == 0
    got = {it.url: it.tries for it in await drain_all(st)}
    assert got[held[0].url] == 1 and got[item(4).url] == 0
    st.close()


async def test_kill_without_close_loses_only_unflushed_batch(path, monkeypatch):
    """Simulate kill -9: flush some batches, then abandon the store without close()."""
    _, st = open_state(path, CFG)
    for i in range(10):
        st.add(item(i))
    popped = [await st.pop() for _ in range(4)]
    for it in popped[:2]:
        st.write(Record(url=it.url, status=200))
        st.done(it)
    await st.aflush()  # committed: 10 queued, 2 done with records, 2 in flight
    st.add(item(99))  # never flushed: lost with the "kill"
    st.write(Record(url="http://a.test/lost", status=200))
    # "kill": drop the writer and the lock without flushing
    st._submit(None)
    st._writer.join()
    st._rconn.close()
    st._unlock()
    st._closed = True

    _, st2 = open_state(path, None)
    assert st2.resumed_records == 2
    assert st2.recovered_in_flight == 2
    assert not st2.seen(item(99).url)
    urls = [it.url for it in await drain_all(st2)]
    assert urls == [item(i).url for i in (2, 3, 4, 5, 6, 7, 8, 9)]
    st2.close()


async def test_batches_are_committed_by_the_timer_without_blocking(path):
    _, st = open_state(path, CFG)
    st.add(item(1))
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT count(*) FROM urls").fetchone()[0] == 0  # still batched
    await wait_until(lambda: reader.execute("SELECT count(*) FROM urls").fetchone()[0] == 1)
    reader.close()
    st.close()


async def test_a_batch_commits_on_time_while_workers_wait_for_a_host(path):
    """The store's flush timer is its own, not the timer that wakes workers for a due host
    (they once shared one attribute: a batch then waited for the host's delay, and a flush
    could cancel the workers' wake-up)."""
    _, st = open_state(path, CFG)
    st.hosts.configure(Politeness(delay=1.5))
    st.add(item(1))
    st.add(item(2))
    first = await st.pop()
    waiter = asyncio.ensure_future(st.pop())  # the host is not due for 1.5 s: its wake timer is armed
    await wait_until(lambda: any(lane.timer is not None for lane in st._lanes))
    st.add(item(3))  # a batch to commit within FLUSH_INTERVAL (0.2 s), wake timer or not
    reader = sqlite3.connect(path)
    # committed long before the host's 1.5 s, however loaded the machine: the wait is on the
    # commit, and the worker is still waiting for the host when it lands
    await wait_until(lambda: reader.execute("SELECT count(*) FROM urls").fetchone()[0] == 3, timeout=1.2)
    assert not waiter.done()
    st.done(first)
    got = await asyncio.wait_for(waiter, 3)  # and the flush did not cancel the worker's wake-up
    assert got.url == item(2).url
    reader.close()
    st.close()


async def test_batch_of_many_ops_flushes_at_flush_ops(path, monkeypatch):
    monkeypatch.setattr(store_mod, "FLUSH_OPS", 100)
    monkeypatch.setattr(store_mod, "FLUSH_INTERVAL", 60.0)
    _, st = open_state(path, CFG)
    for i in range(250):
        st.add(item(i))
    reader = sqlite3.connect(path)
    # the flush is scheduled with call_soon, at the end of this stretch; the timer (60 s) never rings
    await wait_until(lambda: reader.execute("SELECT count(*) FROM urls").fetchone()[0] == 250)
    reader.close()
    st.close()


async def test_spill_to_disk_and_refill_in_order(path, monkeypatch):
    monkeypatch.setattr(store_mod, "MEM_QUEUE", 10)
    monkeypatch.setattr(store_mod, "REFILL", 7)
    _, st = open_state(path, CFG)
    for i in range(100):
        st.add(item(i))
    assert st.hosts.size == 10 and st.size == 100  # in memory, and in all
    out = []
    for n in range(100):
        it = await st.pop()
        out.append(it.url)
        if n == 30:  # a requeue while spilled goes first in its host's queue
            st.requeue(it)
            st.done(it)
            continue
        if n == 50:
            st.add(item("late"))
        st.done(it)
        if not st.size:
            break
    while st.size:
        it = await st.pop()
        out.append(it.url)
        st.done(it)
    await asyncio.wait_for(st.join(), 1)
    expected = [item(i).url for i in range(31)] + [item(i).url for i in range(30, 100)] + [item("late").url]
    assert out == expected
    st.close()


async def test_pop_waits_for_add(path):
    _, st = open_state(path, CFG)
    waiter = asyncio.ensure_future(st.pop())
    await wait_until(lambda: any(lane.getters for lane in st._lanes))  # it waits, in its lane
    assert not waiter.done()
    st.add(item(1))
    got = await asyncio.wait_for(waiter, 1)
    assert got.url == item(1).url
    # a cancelled waiter does not swallow the next item
    w2 = asyncio.ensure_future(st.pop())
    await wait_until(lambda: any(lane.getters for lane in st._lanes))
    w2.cancel()
    st.add(item(2))
    assert (await asyncio.wait_for(st.pop(), 1)).url == item(2).url
    st.close()


async def test_seen_is_exact_beyond_the_cache(path, monkeypatch):
    monkeypatch.setattr(store_mod, "CACHE", 4)
    _, st = open_state(path, CFG)
    for i in range(3000):
        st.add(item(i))
    await st.aflush()
    assert all(st.seen(item(i).url) for i in range(0, 3000, 7))
    assert not any(st.seen(f"http://a.test/x{i}") for i in range(3000))
    assert len(st._cache) <= 4
    st.close()


def test_corrupt_file_is_refused_and_untouched(path):
    garbage = b"this is not a database\n" * 100
    with open(path, "wb") as fh:
        fh.write(garbage)
    with pytest.raises(StateError, match="not an SQLite database"):
        open_state(path, CFG)
    assert open(path, "rb").read() == garbage


def test_damaged_sqlite_file_is_refused_and_untouched(path):
    _, st = open_state(path, CFG)
    st.close()
    data = bytearray(open(path, "rb").read())
    data[100:4096] = b"\xff" * (4096 - 100)  # wreck page 1 after the header
    open(path, "wb").write(bytes(data))
    with pytest.raises(StateError, match="corrupt|not a crawltop"):
        open_state(path, CFG)
    assert open(path, "rb").read() == bytes(data)


def test_other_schema_version_is_refused(path):
    _, st = open_state(path, CFG)
    st.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE settings SET value = ? WHERE key = 'schema'", (json.dumps(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    before = open(path, "rb").read()
    with pytest.raises(StateError, match="schema version"):
        open_state(path, CFG)
    assert open(path, "rb").read() == before


def test_foreign_sqlite_file_is_refused(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE x(y)")
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="not a crawltop state"):
        open_state(path, CFG)


def test_missing_file_for_resume(path):
    with pytest.raises(StateError, match="no such state file"):
        open_state(path, None, {}, resume_only=True)
    assert not os.path.exists(path)


def test_second_process_is_locked_out(path):
    _, st = open_state(path, CFG)
    with pytest.raises(StateError, match="in use"):
        open_state(path, None)
    st.close()
    _, st = open_state(path, None)
    st.close()


def test_finished_state_is_reported_and_not_rewritten(path):
    _, st = open_state(path, CFG)
    st.save_session(status="finished", paused=False, concurrency=7)
    st.close()
    _, st = open_state(path, None, {"concurrency": 1})
    assert st.finished
    st.close()
    _, st = open_state(path, None, {})
    assert st.finished and st.config.concurrency == 7


async def test_export_jsonl_and_csv(path, tmp_path):
    _, st = open_state(path, CFG)
    st.add(item(1))
    st.add(item(2))
    for it in [await st.pop(), await st.pop()]:
        st.write(Record(url=it.url, status=200, content_type="text/html", size=10, num_urls=2))
        st.done(it)
    st.write(Record(url="http://a.test/r", status=301, next_url="http://a.test/1", merged=True))
    st.write(Record(url="http://a.test/e", error="ConnectionError: refused, \"quoted\"\nnewline"))
    st.close()
    jl, cv = str(tmp_path / "out.jsonl"), str(tmp_path / "out.csv")
    assert export_jsonl(path, jl) == 4
    rows = [json.loads(line) for line in open(jl, encoding="utf-8")]
    assert [r["url"] for r in rows] == [item(1).url, item(2).url, "http://a.test/r", "http://a.test/e"]
    assert rows[2]["merged"] is True and rows[2]["next_url"] == "http://a.test/1"
    assert rows[0]["run"] == 1 and rows[0]["status"] == 200
    assert export_csv(path, cv) == 4
    with open(cv, newline="", encoding="utf-8") as fh:
        got = list(csv.DictReader(fh))
    assert list(got[0].keys()) == CSV_FIELDS
    assert got[3]["error"] == "ConnectionError: refused, \"quoted\"\nnewline"
    assert got[3]["status"] == "" and got[0]["status"] == "200"


def test_export_refuses_corrupt_file(path, tmp_path):
    open(path, "wb").write(b"nope" * 10)
    with pytest.raises(StateError):
        export_jsonl(path, str(tmp_path / "x.jsonl"))


def test_empty_database_from_a_kill_during_creation_is_a_new_state(path):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")  # header written, no table yet
    conn.close()
    with pytest.raises(StateError, match="no such state file"):
        open_state(path, None, {}, resume_only=True)
    cfg, st = open_state(path, CFG)
    assert not st.resumed and cfg == CFG
    st.close()
    cfg, st = open_state(path, None)
    assert st.resumed and cfg.roots == CFG.roots
    st.close()


async def test_jsonl_follows_commits_and_catches_up_on_resume(path, tmp_path):
    out = tmp_path / "out.jsonl"
    _, st = open_state(path, CFG)
    st.attach_jsonl(str(out))
    for i in range(5):
        st.write(Record(url=item(i).url, status=200, elapsed_ms=1.5, error="é"))
    assert out.read_text() == ""  # nothing before the commit
    await st.aflush()
    assert len(out.read_text().splitlines()) == 5
    st.close()
    # a kill after the commit but before the JSONL write, in the middle of a line
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:2]) + lines[2][:7])
    _, st = open_state(path, None)
    st.attach_jsonl(str(out))
    assert st.jsonl_caught_up == 3
    st.write(Record(url=item(9).url, status=404))
    st.close()
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["url"] for r in got] == [item(i).url for i in (0, 1, 2, 3, 4, 9)]
    assert got[3] == Record(url=item(3).url, status=200, elapsed_ms=1.5, error="é").to_dict()
    # the JSONL file is gone: a resume writes it again from the state
    out.unlink()
    _, st = open_state(path, None)
    st.attach_jsonl(str(out))
    st.close()
    assert [json.loads(line)["url"] for line in out.read_text(encoding="utf-8").splitlines()] == [r["url"] for r in got]


async def test_a_failing_state_write_stops_the_crawl_instead_of_hanging(tmp_path, monkeypatch) -> None:
    """Disk full under --state: the crawl stops and says why; it never waits forever."""
    import asyncio

    from support.sites import Site, slow_site

    from crawltop.core import Crawler
    from crawltop.core.config import CrawlConfig

    site = Site(slow_site(400, 0.01))
    await site.start()
    try:
        cfg = CrawlConfig(roots=(site.url + "/",), robots=False, concurrency=4)
        _, store = open_state(str(tmp_path / "s.db"), cfg)
        calls = {"n": 0}
        real = SqliteStore._apply

        def full_disk(self, conn, batch):
            calls["n"] += 1
            if calls["n"] > 1:
                raise OSError(28, "No space left on device")
            return real(self, conn, batch)

        monkeypatch.setattr(SqliteStore, "_apply", full_disk)
        crawler = Crawler(cfg, frontier=store, sinks=[store.sink])
        try:
            await asyncio.wait_for(crawler.crawl(), 20)
        except (OSError, StateError) as exc:
            assert "No space left" in str(exc)
        else:
            raise AssertionError(f"the failed write was swallowed ({calls})")
        assert crawler.stats.state == "DONE"
    finally:
        await site.stop()
