"""The dashboard never falls over on what it reads (a review's finds): hand-made or foreign
`.ended` files in the real run directory (a wrong type in each field, deep nesting, a
symlink, an oversized file) are skipped, a good one beside them still shows, and the table
is drawn under a real TopApp."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support.wait import until

from crawltop.core.dashboard.board import Board
from crawltop.core.monitor.summary import Summary, from_wire, to_wire
from crawltop.core.sockets import ended
from crawltop.tui.top.app import TopApp

pytestmark = pytest.mark.timeout(60)

GOOD = to_wire(Summary(state="DONE", elapsed=12.5, pages=321, records=321, queued=0, seen=400,
                       rate_now=0.0, rate_avg=25.7, concurrency=4, spark=(1, 2, 3)))


def hostile_files() -> dict[str, str]:
    now = time.time()
    bad = {
        "ended-abc": {"summary": {}, "ended": "abc"},
        "pid-list": {"summary": GOOD, "pid": [1], "ended": now},
        "elapsed-x": {"summary": {**GOOD, "elapsed": "x"}, "ended": now},
        "pages-null": {"summary": {**GOOD, "pages": None}, "ended": now},
        "pages-huge": {"summary": {**GOOD, "pages": 10**400}, "ended": now},
        "outcomes-list": {"summary": {**GOOD, "outcomes": {"ok": "many"}}, "ended": now},
        "spark-str": {"summary": {**GOOD, "spark": "abc"}, "ended": now},
        "root-num": {"summary": GOOD, "root": 5, "ended": now},
        "state-num": {"summary": {**GOOD, "state": 3}, "ended": now},
    }
    out = {name: json.dumps(rec) for name, rec in bad.items()}
    out["deep"] = '{"summary":' + "[" * 100_000 + "]" * 100_000 + "}"
    return out


def test_from_wire_checks_every_field() -> None:
    assert from_wire(GOOD).pages == 321
    for field, value in (("elapsed", "x"), ("pages", None), ("pages", True), ("rate_now", float("nan")),
                         ("outcomes", {"ok": "x"}), ("spark", [None]), ("state", 1), ("outcomes", [])):
        with pytest.raises(ValueError):
            from_wire({**GOOD, field: value})


async def test_hostile_ended_files_are_skipped_and_the_table_draws(rundir: Path, tmp_path: Path) -> None:
    d = ended.ended_dir(create=True)
    for name, text in hostile_files().items():
        (d / f"{name}.json").write_text(text)
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"summary": GOOD, "ended": time.time(), "root": "http://linked/"}))
    os.symlink(target, d / "linked.json")
    (d / "huge.json").write_text(json.dumps({"summary": GOOD, "pad": "x" * (ended.MAX_BYTES + 10)}))
    assert ended.write("good", {"summary": GOOD, "ended": time.time(), "root": "http://127.0.0.1:1/",
                                "how": "done", "by": "", "pid": 1, "started": time.time() - 12}) is not None

    summary_bad = ("elapsed", "pages", "outcomes", "spark", "state")  # left to from_wire, in the board
    assert set(ended.read_all()) == {"good"} | {n for n in hostile_files() if n.startswith(summary_bad)}
    board = Board()
    await board.tick()
    assert set(board.rows) == {"good"}
    app = TopApp(board, cwd=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: "good" in app.table.row_keys(), 10)
        assert "321" in app.table.line_of("good")
        await pilot.pause(2.5)  # a few ticks more: still running
        assert app.is_running


async def test_a_crashed_crawl_is_crashed_not_failed(rundir: Path) -> None:
    """"failed" is the outcome column's word (URLs); a crawl that died of an error is "crashed",
    also from the .ended file of an engine that still wrote "failed"."""
    ended.write("old", {"summary": GOOD, "ended": time.time(), "how": "failed"})
    board = Board()
    await board.tick()
    assert board.rows["old"].state == "crashed"
