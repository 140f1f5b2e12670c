"""Every screen's footer at 80x24 says how to leave it and how to get help.

The screens are found by walking crawltop.tui (a new one is covered without touching this
file, or fails here until FACTORIES says how to build it), pushed on a monitor of a real
crawl of a local site or on a dashboard of a real (private) run directory, and the last
row of the rendered screen is read, as a person would. A full screen shows `? Help` and
its ways out (tui/panels/keybar.py LEAVE: quit, detach, back, close); a dialog shows its
way out and every one of its keys: its key bar is its help (`?` is typed text in a prompt).
"""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import io
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.ctl import cli
from support.sites import slow_site
from support.tui import make
from support.wait import until
from textual.app import App
from textual.screen import ModalScreen, Screen

import crawltop.tui
from crawltop.core.dashboard.board import Board
from crawltop.core.sockets.client import RemoteCrawler
from crawltop.core.sockets.rundir import resolve
from crawltop.tui.actions import TOP_NAV, help_lines, top_actions
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.keybar import LEAVE, KeyBar
from crawltop.tui.panels.summary import SummaryScreen, summary_content
from crawltop.tui.screens.dialogs import (
    ConcurrencyPrompt,
    ConfirmQuit,
    ErrorListScreen,
    HelpScreen,
    MergeListScreen,
)
from crawltop.tui.screens.steer import TextPrompt
from crawltop.tui.top.app import TopApp
from crawltop.tui.top.dialogs import ConfirmDismiss, ConfirmStop, NewCrawlPrompt

pytestmark = pytest.mark.timeout(30)

SIZE = (80, 24)


def screen_classes() -> list[type[Screen[Any]]]:
    """Every Screen defined in crawltop.tui but those only others derive from (bases)."""
    found: set[type[Screen[Any]]] = set()
    for info in pkgutil.walk_packages(crawltop.tui.__path__, "crawltop.tui."):
        module = importlib.import_module(info.name)
        found |= {obj for obj in vars(module).values() if isinstance(obj, type) and issubclass(obj, Screen)
                  and obj.__module__ == module.__name__}
    bases = {base for cls in found for base in cls.__mro__[1:]}
    return sorted(found - bases, key=lambda cls: cls.__name__)


async def _start(line: str, secret: str) -> str | None:
    return "not in this test"


def _help(app: App[Any]) -> HelpScreen:
    return HelpScreen(app.help_keys() if isinstance(app, CrawlApp) else help_lines(None, top_actions(), TOP_NAV))


# How to build a screen whose constructor needs arguments: the fewest real ones.
FACTORIES: dict[type[Screen[Any]], Callable[[Any], Screen[Any]]] = {
    ConfirmQuit: lambda app: ConfirmQuit(3, 120),
    ConcurrencyPrompt: lambda app: ConcurrencyPrompt(4),
    HelpScreen: _help,
    ErrorListScreen: lambda app: ErrorListScreen(app.refresh_now()),
    MergeListScreen: lambda app: MergeListScreen(app.refresh_now()),
    TextPrompt: lambda app: TextPrompt("Ignore URLs matching:"),
    SummaryScreen: lambda app: SummaryScreen(summary_content(app.refresh_now(), [])),
    ConfirmStop: lambda app: ConfirmStop("one", 5),
    ConfirmDismiss: lambda app: ConfirmDismiss(["one", "two"]),
    NewCrawlPrompt: lambda app: NewCrawlPrompt(_start, "/tmp"),
}


def build(cls: type[Screen[Any]], app: App[Any]) -> Screen[Any]:
    if cls in FACTORIES:
        return FACTORIES[cls](app)
    needed = [p for p in inspect.signature(cls).parameters.values()
              if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        pytest.fail(f"{cls.__name__} needs {[p.name for p in needed]}: add it to FACTORIES")
    return cls()


def footer(app: App[Any]) -> str:
    """The screen's last row as the terminal shows it (what is drawn over what, too)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False).rstrip("\n").split("\n")[-1]


def shown_keys(app: App[Any], screen: Screen[Any]) -> dict[str, str]:
    """action -> "key Label" of the keys the screen's bindings put on its bar."""
    keys: dict[str, str] = {}
    for _node, binding, _enabled, _tooltip in screen.active_bindings.values():
        if binding.show and binding.action not in keys and binding.action != "app.command_palette":
            keys[binding.action] = f"{app.get_key_display(binding)} {binding.description}"
    return keys


def wanted(app: App[Any], screen: Screen[Any]) -> list[str]:
    """What the footer must hold: the ways out, and `? Help` (a full screen) or every one of
    the dialog's keys, with the hints of its key bar (a dialog: its bar is its help)."""
    keys = shown_keys(app, screen)
    leave = [text for action, text in keys.items() if action in LEAVE]
    assert leave, f"{type(screen).__name__} has no way out on its bar: {keys}"
    if not isinstance(screen, ModalScreen):
        return [*leave, "? Help"]
    hints = [f"{key} {what}" for bar in screen.query(KeyBar) for key, what in bar.hints]
    return [*keys.values(), *hints]


async def check_footer(pilot: Any, app: App[Any]) -> str:
    """Assert the footer holds the screen's ways out and its help; return it."""
    screen = app.screen
    await pilot.pause(0.1)
    with contextlib.suppress(AssertionError):  # the bar is drawn after the screen's first refresh
        await until(pilot, lambda: all(w in footer(app) for w in wanted(app, screen)), 3)
    text, want = footer(app), wanted(app, screen)
    assert all(w in text for w in want), (type(screen).__name__, want, text)
    return text


@pytest.mark.parametrize("cls", screen_classes(), ids=lambda cls: cls.__name__)
async def test_every_screen_says_how_to_leave_and_get_help(cls: type[Screen[Any]], serve, rundir: Path) -> None:
    if cls.__module__.startswith("crawltop.tui.top."):
        board = Board()
        top = TopApp(board, cwd=rundir.parent)
        try:
            async with top.run_test(size=SIZE) as pilot:
                await pilot.pause(0.1)
                await top.push_screen(build(cls, top))
                await check_footer(pilot, top)
        finally:
            await board.close()
        return
    site = await serve(slow_site(300, 0.2))
    crawler, _sink, app = make(site.url + "/", concurrency=2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: crawler.stats.pages >= 1)
        await app.push_screen(build(cls, app))
        await check_footer(pilot, app)
    assert app.crawl_task is not None
    await asyncio.wait_for(asyncio.shield(app.crawl_task), 10)  # stopped as the app closed


async def test_the_main_screens_say_how_to_leave_and_get_help(serve, rundir: Path) -> None:
    """The same-loop monitor (`crawltop crawl`): q quits; the dashboard: q quits (crawls go on)."""
    site = await serve(slow_site(300, 0.2))
    crawler, _sink, app = make(site.url + "/", concurrency=2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: crawler.stats.pages >= 1)
        text = await check_footer(pilot, app)
        assert text.rstrip().endswith("? Help  q Quit"), text
    await asyncio.wait_for(asyncio.shield(app.crawl_task), 10)

    board = Board()
    try:
        top = TopApp(board, cwd=rundir.parent)
        async with top.run_test(size=SIZE) as pilot:
            text = await check_footer(pilot, top)
            assert "? Help  q Quit" in text, text
    finally:
        await board.close()


async def leave_a_monitor(from_list: bool) -> None:
    """Attach to `feet`, read the footers of the monitor and of its quit question, leave."""
    remote = await RemoteCrawler.connect(resolve("feet"))
    app = CrawlApp(remote, from_list=from_list)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: remote.stats.snap.pages > 0, 20)
        text = await check_footer(pilot, app)
        assert "d Detach" in text and "q Quit" in text, text
        assert ("esc Back" in text) == from_list, text
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmQuit), 5)
        text = await check_footer(pilot, app)
        assert "d Detach" in text and "n Keep crawling" in text, text
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmQuit), 5)
        await pilot.press("escape" if from_list else "d")
        await until(pilot, lambda: not app.is_running, 5)
    assert remote.detached and remote.ended is None  # left; the crawl goes on
    await remote.close()


@pytest.mark.timeout(90)
async def test_an_attached_monitor_says_detach_and_one_from_the_list_says_back(site: str, rundir: Path) -> None:
    """`crawltop attach` (d detaches) and the monitor `enter` opens on the dashboard (esc goes
    back), over a real detached crawl's socket; the quit question offers d too."""
    rc, out, err = await cli("crawl", site, "--detach", "--name", "feet", "-c", "2", "--no-robots")
    assert rc == 0, err
    try:
        await leave_a_monitor(from_list=False)
        await leave_a_monitor(from_list=True)
    finally:
        await cli("ctl", "feet", "stop")
