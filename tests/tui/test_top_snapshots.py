"""Snapshot tests of the dashboard (`crawltop` alone: every crawl on one screen) with fixed data: live,
paused, done, stopped, lost crawls (tests/support/frozen.py FrozenBoard). Its behaviour
is tested against real crawls in tests/control/test_top.py. Regenerate after an intended
change with:
    .venv/bin/pytest tests/tui/test_top_snapshots.py --snapshot-update
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.frozen import FrozenBoard

from crawltop.tui.top.app import TopApp

pytestmark = pytest.mark.timeout(60)


async def settle(pilot) -> None:
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


def app() -> TopApp:
    return TopApp(FrozenBoard(), cwd=Path("/home/ops/crawls"), refresh=3600)  # type: ignore[arg-type]


class TestDashboard:
    def test_dashboard_80x24(self, snap_compare) -> None:
        assert snap_compare(app(), terminal_size=(80, 24), run_before=settle)

    def test_dashboard_120x40(self, snap_compare) -> None:
        assert snap_compare(app(), terminal_size=(120, 40), run_before=settle)

    def test_sorted_by_pages_filtered_80x24(self, snap_compare) -> None:
        assert snap_compare(app(), press=["o", "o", "slash", "l", "o", "enter"], terminal_size=(80, 24),
                            run_before=settle)

    def test_new_crawl_prompt_80x24(self, snap_compare) -> None:
        assert snap_compare(app(), press=["n"], terminal_size=(80, 24), run_before=settle)

    def test_help_80x24(self, snap_compare) -> None:
        assert snap_compare(app(), press=["question_mark"], terminal_size=(80, 24), run_before=settle)

    def test_dismiss_all_question_80x24(self, snap_compare) -> None:
        """X: the ended crawls named in the question, its keys on its own bar."""
        assert snap_compare(app(), press=["X"], terminal_size=(80, 24), run_before=settle)


async def _colours() -> set[str]:
    top = app()
    async with top.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        svg = top.export_screenshot()
    colours = set(re.findall(r"fill=\"#([0-9a-f]{6})\"", svg)) | set(re.findall(r"fill: #([0-9a-f]{6})", svg))
    return {c for c in colours if not c[0:2] == c[2:4] == c[4:6]}  # drop the greys


CHROME = {"ff5f57", "febc2e", "28c840", "c5c8c6"}  # the SVG's window dots, its default foreground


async def test_dashboard_no_color(monkeypatch) -> None:
    assert len(await _colours() - CHROME) > 3  # states and sparklines in colour
    monkeypatch.setenv("NO_COLOR", "1")
    assert await _colours() <= CHROME


async def test_dashboard_palette_offers_what_applies() -> None:
    """ctrl+p on the dashboard: its table's actions, those that apply to the selected row."""
    from support.wait import until
    from textual.command import CommandList, CommandPalette

    top = app()
    async with top.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        assert top.selected_row() is not None and top.selected_row().name == "blog"  # running: no dismiss
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(top.screen, CommandPalette))
        options = top.screen.query_one(CommandList)
        await until(pilot, lambda: options.option_count > 0)
        await pilot.pause(0.2)
        titles = {str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)}
        assert {"Open selected crawl", "Pause crawl", "Stop selected crawl…", "Start a crawl…"} <= titles
        assert "Resume crawl" not in titles and "Dismiss ended crawl" not in titles
