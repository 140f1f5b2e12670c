"""Snapshot tests of the screens, fed with a frozen stand-in for the Crawler.

The stand-in (tests/support/frozen.py FrozenCrawler) returns one fixed Snapshot: fixed clock, fixed
numbers, nothing blinks. It is used here only; every behaviour test drives a real crawl.
Regenerate after an intended change with:
    .venv/bin/pytest tests/tui/test_tui_snapshots.py --snapshot-update
"""
from __future__ import annotations

import dataclasses

import pytest
from support.frozen import ROOT, FrozenCluster, FrozenCrawler

from crawltop.core.monitor.stats import ErrorEvent, Snapshot
from crawltop.tui.app import CrawlApp

pytestmark = pytest.mark.timeout(60)


async def settle(pilot) -> None:
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


class TestMainScreen:
    def test_main_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), terminal_size=(80, 24), run_before=settle)

    def test_main_120x40(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), terminal_size=(120, 40), run_before=settle)

    def test_paused_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler("PAUSED")), terminal_size=(80, 24), run_before=settle)

    def test_pause_key_80x24(self, snap_compare) -> None:
        """Pressing p shows PAUSED at once and swaps Pause for Resume in the footer."""
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["p"], terminal_size=(80, 24), run_before=settle)

    def test_tiny_40x12(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), terminal_size=(40, 12), run_before=settle)


class SharedPrefix(FrozenCrawler):
    """Failed URLs that share a 60-character prefix (cut in the middle: rows must not all read
    `/private/report…`)."""

    def make_snapshot(self, state: str) -> Snapshot:
        base = f"{ROOT}/private/reports/2026/quarterly/finance-department-summary"
        errs = tuple(ErrorEvent(i, float(i), f"{base}-{name}.pdf", "connection refused",
                                "Cannot connect to host (connection refused)", 1, None, "connect")
                     for i, name in enumerate(("alpha", "beta", "gamma"), 1))
        return dataclasses.replace(super().make_snapshot(state), recent_errors=errs, errors=3,
                                   errors_by_kind={"connect": 3})


class TestEightyColumns:
    def test_shared_prefix_errors_80x24(self, snap_compare) -> None:
        """q Quit on the key bar, and the error rows told apart by the ends of their URLs."""
        assert snap_compare(CrawlApp(SharedPrefix()), terminal_size=(80, 24), run_before=settle)

    def test_shared_prefix_error_list_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(SharedPrefix()), press=["e"], terminal_size=(80, 24), run_before=settle)


class TestScreens:
    def test_help(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["question_mark"], terminal_size=(80, 24),
                            run_before=settle)

    def test_error_list(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["e"], terminal_size=(100, 24), run_before=settle)

    def test_merge_list(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["r"], terminal_size=(100, 24), run_before=settle)

    def test_quit_confirmation(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["q"], terminal_size=(80, 24), run_before=settle)

    def test_concurrency_prompt(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["c", "2", "5"], terminal_size=(80, 24), run_before=settle)

    def test_finish_summary(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(finish=True)), terminal_size=(80, 30), run_before=settle)


class TestSteering:
    """The queue view, the trap warning and the ignores screen (steering a crawl by hand), at 80x24."""

    def test_queue_view_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(traps=True)), press=["u"], terminal_size=(80, 24), run_before=settle)

    def test_trap_warning_80x24(self, snap_compare) -> None:
        async def warm(pilot) -> None:
            await pilot.pause(1.2)  # the warning is refreshed about once a second
            await settle(pilot)

        assert snap_compare(CrawlApp(FrozenCrawler(traps=True)), terminal_size=(80, 24), run_before=warm)

    def test_ignores_screen_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler()), press=["I"], terminal_size=(80, 24), run_before=settle)

    def test_ignore_prompt_prefilled_80x24(self, snap_compare) -> None:
        """i in the queue view pre-fills the prompt from the selected prefix."""
        assert snap_compare(CrawlApp(FrozenCrawler(traps=True)), press=["u", "i"], terminal_size=(80, 24),
                            run_before=settle)


class TestCluster:
    """A crawl shared through Redis: the processes panel, one process lost."""

    def test_processes_120x40(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCluster()), terminal_size=(120, 40), run_before=settle)

    def test_processes_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCluster()), terminal_size=(80, 24), run_before=settle)


class TestHostQueues:
    """Host queues: 40 hosts in every state, in the side panel, the header, the
    workers line and the queues view (`H`)."""

    def test_main_many_hosts_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(many_hosts=True)), terminal_size=(80, 24), run_before=settle)

    def test_main_many_hosts_120x40(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(many_hosts=True)), terminal_size=(120, 40), run_before=settle)

    def test_nothing_due_says_why_80x24(self, snap_compare) -> None:
        """Every host with work waits or backs off: the workers line says so, and when."""
        assert snap_compare(CrawlApp(FrozenCrawler(idle=True)), terminal_size=(80, 24), run_before=settle)

    def test_queues_view_80x24(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(many_hosts=True)), press=["H"], terminal_size=(80, 24),
                            run_before=settle)

    def test_queues_view_120x40(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(FrozenCrawler(many_hosts=True)), press=["H"], terminal_size=(120, 40),
                            run_before=settle)

    def test_queues_view_by_errors_backing_off_80x24(self, snap_compare) -> None:
        """o: by errors; f four times: only the hosts backing off."""
        assert snap_compare(CrawlApp(FrozenCrawler(many_hosts=True)), press=["H", "o", "f", "f", "f", "f"],
                            terminal_size=(80, 24), run_before=settle)
