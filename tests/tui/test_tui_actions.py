"""The action table (tui/actions.py) is the one place the main screen's keys are described:
the bindings, the key bar, the help screen and the command palette are all read from it.

Run against the app with the frozen stand-in crawler (tests/support/frozen.py): no site, no engine.
"""
from __future__ import annotations

import pytest
from support.frozen import FrozenCluster, FrozenCrawler
from support.wait import until
from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from crawltop.core.surface import Parts
from crawltop.tui.actions import ACTIONS, NAV_KEYS
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.keybar import KeyBar
from crawltop.tui.screens.dialogs import HelpScreen

pytestmark = pytest.mark.timeout(30)

# What each key ran before the table existed: a key that did X still does X.
KEYS = {
    "p": ["pause", "resume"], "plus": ["more(1)"], "equals_sign": ["more(1)"], "minus": ["fewer(1)"],
    "right_square_bracket": ["more(10)"], "greater_than_sign": ["more(10)"],
    "left_square_bracket": ["fewer(10)"], "less_than_sign": ["fewer(10)"],
    "c": ["set_concurrency"], "x": ["cancel_worker"], "e": ["errors"], "r": ["merges"], "s": ["summary"],
    "question_mark": ["help"], "u": ["queue"], "H": ["queues"], "i": ["ignore"], "I": ["ignores"],
    "a": ["add_seed"], "h": ["toggle_host"], "t": ["host_delay"], "P": ["process('pause')"],
    "R": ["process('resume')"], "K": ["process('stop')"], "q": ["quit"], "d": ["detach"],
    "ctrl+c": ["quit"], "ctrl+q": ["quit"],
    "escape": ["to_list"],  # only in a monitor opened from the dashboard (its row's `enabled`)
}


class Remote(FrozenCluster):
    """A monitor of a shared crawl in other processes: detach and the process keys exist."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str]] = []
        self.detached = False

    def pause_process(self, proc: str) -> None:
        self.sent.append(("pause", proc))

    def resume_process(self, proc: str) -> None:
        self.sent.append(("resume", proc))

    def stop_process(self, proc: str) -> None:
        self.sent.append(("stop", proc))

    @property
    def parts(self) -> Parts:  # declares what it has (core/surface.py): detach too
        return Parts(steer=self, cluster=self, detach=self)

    def detach(self) -> None:
        self.detached = True
        self._stop.set()


def test_bindings_are_the_table() -> None:
    keys: dict[str, list[str]] = {}
    for b in CrawlApp.BINDINGS:
        assert not isinstance(b, tuple)
        keys.setdefault(b.key, []).append(b.action)
    assert keys == KEYS
    for row in ACTIONS:
        (b,) = [b for b in CrawlApp.BINDINGS if not isinstance(b, tuple) and b.id == row.id]
        assert (b.key, b.action, b.description, b.tooltip, b.show, b.key_display) == (
            row.key, row.action, row.label, row.description, row.show, row.display)
    ids = [row.id for row in ACTIONS]
    assert len(set(ids)) == len(ids)
    assert {b.action for b in CrawlApp.BINDINGS if not isinstance(b, tuple) and not b.id} <= {
        row.action for row in ACTIONS}


async def test_key_bar_says_each_shown_action_label() -> None:
    app = CrawlApp(FrozenCrawler())
    async with app.run_test(size=(160, 30)) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Pause" in bar.plain)
        for row in ACTIONS:
            if row.show and row.applies(app) and app.check_action(row.name, row.params):
                assert f"{row.shown_key} {row.label} " in bar.plain, row.id
        assert "Resume" not in bar.plain and "Detach" not in bar.plain  # not now / not for this crawl
        assert "Queue" not in bar.plain  # show=False: help and palette only


async def help_text(pilot, app: CrawlApp) -> str:
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(app.screen, HelpScreen) and bool(app.screen.query("#help-text")))
    return str(app.screen.query_one("#help-text").render())


async def test_help_lists_the_table_for_this_crawl() -> None:
    app = CrawlApp(FrozenCrawler())
    async with app.run_test(size=(100, 60)) as pilot:
        text = await help_text(pilot, app)
        for row in ACTIONS:
            described = row.description[0].lower() + row.description[1:]
            assert (described in text) == (row.when == "always"), row.id
        for key, what in NAV_KEYS:
            assert f"{key} " in text and what in text
        assert "= > <" in text and "same as + ] [" in text

    app = CrawlApp(Remote())
    async with app.run_test(size=(100, 60)) as pilot:
        text = await help_text(pilot, app)
        for row in ACTIONS:
            shown = f"{row.shown_key} " in text and row.description[1:] in text
            assert shown == (row.when != "list"), row.id
        await pilot.press("escape", "escape")  # the help closes; a plain attach stays
        await pilot.pause(0.1)
        assert not app.crawler.detached and app.is_running

    # opened from the dashboard: esc goes back to the list, and says so
    crawler = Remote()
    app = CrawlApp(crawler, from_list=True)
    async with app.run_test(size=(100, 60)) as pilot:
        text = await help_text(pilot, app)
        assert "esc " in text and "back to the list of crawls; this one goes on" in text
        await pilot.press("escape")  # closes the help
        await pilot.press("escape")  # back to the list
        await until(pilot, lambda: crawler.detached)
    assert app.return_code == 0


async def palette_entries(pilot, app: CrawlApp) -> dict[str, str]:
    """Open the palette with nothing typed: title -> the prompt (title and help) of each entry."""
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette) and isinstance(app.focused, Input))
    options = app.screen.query_one(CommandList)
    await until(pilot, lambda: options.option_count > 0)
    await pilot.pause(0.2)
    prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
    return {p.split("\n")[0]: p for p in prompts}


async def choose(pilot, app: CrawlApp, title: str) -> None:
    options = app.screen.query_one(CommandList)
    index = next(i for i in range(options.option_count)
                 if str(options.get_option_at_index(i).prompt).split("\n")[0] == title)
    options.highlighted = index
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_palette_has_every_action_with_the_tables_words() -> None:
    crawler = Remote()
    app = CrawlApp(crawler)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.processes_panel is not None
        app.processes_panel.table.focus()  # the process keys act on its selected row
        await until(pilot, lambda: app.processes_panel is not None and app.processes_panel.table.row_count > 0)
        entries = await palette_entries(pilot, app)
        for row in ACTIONS:
            if not app.check_action(row.name, row.params):
                assert row.title not in entries, row.id
                continue
            assert entries[row.title].endswith(f"{row.description} ({row.shown_key})"), row.id
        for title in ("Detach", "Pause selected process", "Resume selected process", "Stop selected process"):
            assert title in entries
        assert "Resume crawl" not in entries  # it runs: pause applies, resume does not

        await choose(pilot, app, "Stop selected process")
        proc = app.processes_panel.table.selected_key()
        await until(pilot, lambda: crawler.sent == [("stop", proc)])

        await palette_entries(pilot, app)
        await choose(pilot, app, "Detach")
        await until(pilot, lambda: crawler.detached)
    assert app.return_code == 0


async def test_palette_leaves_out_what_this_crawl_lacks() -> None:
    app = CrawlApp(FrozenCrawler())
    async with app.run_test(size=(120, 40)) as pilot:
        entries = await palette_entries(pilot, app)
        assert "Pause crawl" in entries and "Error list" in entries
        for row in ACTIONS:
            if row.when != "always":
                assert row.title not in entries, row.id
        await pilot.press("escape")
        app.crawler.stop()


def test_the_dashboard_acts_with_the_main_screens_rows() -> None:
    """One set of words for one action: the dashboard's keys on the selected crawl are the main screen's rows: the
    same key, label, title and words; its bindings are made from its table."""
    from crawltop.tui.actions import TOP_SHARED, top_actions
    from crawltop.tui.top.app import TopApp

    main = {row.id: row for row in ACTIONS}
    top = {row.id: row for row in top_actions()}
    for key in TOP_SHARED:
        a, b = main[key], top[key]
        assert (a.key, a.action, a.label, a.title, a.description) == (b.key, b.action, b.label, b.title,
                                                                       b.description), key
    keys = {b.key: b.action for b in TopApp.BINDINGS if not isinstance(b, tuple)}
    assert keys["p"] in ("pause", "resume") and keys["plus"] == "more(1)" and keys["i"] == "ignore"
    assert keys["enter"] == "open" and keys["k"] == "stop" and keys["n"] == "new" and keys["slash"] == "filter"


def test_each_row_says_when_it_runs_and_rows_of_one_action_agree() -> None:
    """check_action is a lookup of the rows' own predicates: rows that run the same action
    (Textual asks by action name) carry the same one, and each says in words when it runs."""
    from dataclasses import dataclass

    from crawltop.tui.actions import ENABLED
    from crawltop.tui.screens.steer import TextPrompt

    for row in ACTIONS:
        assert ENABLED[row.name] is row.enabled, row.id
        assert row.enabled.words, row.id

    @dataclass
    class Now:
        live: bool = True
        paused: bool = False
        concurrency: int = 5
        finished: bool = False
        looking_at: object = None
        on_main: bool = True
        focus: str | None = None
        can_detach: bool = False
        cluster: bool = False
        from_list: bool = False

    def runs(name: str, **now: object) -> bool | None:
        return ENABLED[name](Now(**now))  # type: ignore[arg-type]

    assert runs("pause") and not runs("pause", paused=True) and runs("resume", paused=True)
    assert not runs("pause", live=False) and not runs("resume", live=False, paused=True)
    assert runs("fewer") is True and runs("fewer", concurrency=1) is None and runs("fewer", on_main=False) is False
    assert not runs("cancel_worker") and runs("cancel_worker", focus="workers")
    assert not runs("toggle_host", focus="workers") and runs("host_delay", focus="hosts")
    assert runs("process", focus="processes") and not runs("process", focus="processes", on_main=False)
    assert not runs("ignore", looking_at=TextPrompt("?", apply=lambda text: None)) and runs("add_seed")
    assert not runs("summary") and runs("summary", finished=True)
    assert not runs("detach") and runs("detach", can_detach=True)
    assert not runs("detach", can_detach=True, finished=True) and runs("detach", can_detach=True, finished=True,
                                                                       from_list=True)
    assert runs("quit", live=False) and runs("help", live=False)


def test_each_dashboard_row_says_when_it_runs_and_rows_of_one_action_agree() -> None:
    """TopApp.check_action is a lookup too: the dashboard's rows, the main screen's shared ones
    included, carry the dashboard's predicates (on the list and its selected crawl), not the monitor's."""
    from dataclasses import dataclass

    from crawltop.tui.actions import ENABLED, TOP_ENABLED, top_actions

    for row in top_actions():
        assert TOP_ENABLED[row.name] is row.enabled, row.id
        assert row.enabled.words, row.id
    assert TOP_ENABLED["pause"] is not ENABLED["pause"] and TOP_ENABLED["more"] is not ENABLED["more"]

    @dataclass
    class Listing:
        typing_filter: bool = False
        selected_live: bool = True
        selected_paused: bool = False
        selected_workers: int | None = 5
        selected_shared: bool = False
        selected_ended: bool = False
        any_ended: bool = False
        can_start: bool = True

    def runs(name: str, **now: object) -> bool | None:
        return TOP_ENABLED[name](Listing(**now))  # type: ignore[arg-type]

    assert runs("pause") and not runs("pause", selected_paused=True) and runs("resume", selected_paused=True)
    assert not runs("resume") and not runs("open", selected_live=False) and not runs("stop", selected_live=False)
    assert runs("more") and runs("fewer") is True
    assert runs("fewer", selected_workers=1) is None and runs("fewer", selected_workers=None) is None
    assert runs("fewer", selected_live=False) is False
    assert runs("ignore") and not runs("ignore", selected_shared=True)
    assert not runs("dismiss") and runs("dismiss", selected_live=False, selected_ended=True)
    assert not runs("dismiss_all") and runs("dismiss_all", any_ended=True)
    assert runs("new") and not runs("new", can_start=False)
    # the filter line has the keyboard: only sort, help and quit (and the palette, outside the table)
    typing = {row.name: runs(row.name, typing_filter=True, any_ended=True, selected_ended=True)
              for row in top_actions()}
    assert {name for name, ok in typing.items() if ok} == {"sort", "help", "quit"}


async def test_check_action_reads_the_rows_predicates_in_the_app() -> None:
    app = CrawlApp(FrozenCrawler())
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.live)
        assert app.check_action("pause", ()) and not app.check_action("resume", ())
        app.workers_table.focus()
        await pilot.pause()
        assert app.focus == "workers" and app.check_action("cancel_worker", ())
        app.breakdown.hosts.focus()
        await pilot.pause()
        assert app.focus == "hosts" and app.check_action("toggle_host", ())
        assert not app.check_action("cancel_worker", ())
        assert app.check_action("ignore_set", ()) is True  # not a row: runs
        app.crawler.stop()
