"""The dashboard's `n` with its --browser switch: the form starts a detached crawl that loads
its pages in Chromium (a site whose pages a script builds: support/spasite.py), and says in
one line why not when the browser cannot run, starting nothing. And the processes panel of a
shared --browser crawl: each engine's own Chromium."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.frozen import sample_processes
from support.spasite import spa_paths, spa_site
from support.wait import until
from textual.app import App, ComposeResult
from textual.widgets import Checkbox, Input, Static

from crawltop.core.dashboard.board import Board
from crawltop.tui.panels.processes import ProcessesPanel
from crawltop.tui.top.app import TopApp
from crawltop.tui.top.dialogs import NewCrawlPrompt

pytestmark = pytest.mark.timeout(180)


async def open_form(pilot, app: TopApp, line: str, *, back: bool = True) -> NewCrawlPrompt:
    """n, the line typed, the switch turned on (tab to it, space, and back to the line)."""
    await pilot.press("n")
    await until(pilot, lambda: isinstance(app.screen, NewCrawlPrompt), 5)
    prompt = app.screen
    assert isinstance(prompt, NewCrawlPrompt)
    prompt.query_one("#new-line", Input).value = line
    await pilot.press("tab", "space", *(["shift+tab"] if back else []))
    assert prompt.query_one("#new-browser", Checkbox).value
    return prompt


@pytest.mark.chromium
async def test_n_with_the_browser_switch_finds_the_pages_a_script_builds(serve, rundir: Path, tmp_path: Path) -> None:
    site = await serve(spa_site())
    board = Board()
    app = TopApp(board, cwd=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_form(pilot, app, f"{site.url}/ --name spa -c 2 --no-robots --no-sitemaps --browser-quiet 0.3 "
                                    "-o spa.jsonl")
        await pilot.press("enter")
        await until(pilot, lambda: "spa" in board.rows, 60)
        assert not isinstance(app.screen, NewCrawlPrompt)
        await until(pilot, lambda: board.rows["spa"].how == "done", 90)
    records = [json.loads(line) for line in (tmp_path / "spa.jsonl").read_text().splitlines()]
    pages = {r["url"] for r in records if r["kind"] == "page" and r["status"] == 200}
    assert pages == {site.url + p for p in spa_paths()}  # every link is in JSON a script renders
    assert all(site.hits.get(p) == 1 for p in spa_paths())


async def test_n_with_the_browser_switch_says_why_it_cannot_run(serve, rundir: Path, tmp_path: Path) -> None:
    """The browser's own check (core/fetching/browser.py), asked before any crawl starts."""
    site = await serve(spa_site())
    board = Board()
    app = TopApp(board, cwd=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = await open_form(pilot, app, f"{site.url}/ --name nob --browser-path no/such/chromium", back=False)
        await pilot.press("enter")  # on the switch: enter starts, as from a field
        error = prompt.query_one("#new-error", Static)
        await until(pilot, lambda: "not an executable file" in str(error.render()), 10)
        assert f"--browser-path {tmp_path}/no/such/chromium: not an executable file" == str(error.render())
        assert app.screen is prompt  # the form stays, with the reason under its fields
    assert "nob" not in board.rows and site.hits == {}


async def test_the_processes_panel_shows_each_engines_chromium_only_for_a_browser_crawl() -> None:
    plain = sample_processes()
    tabs = [dataclasses.replace(r, info=dataclasses.replace(r.info, browser={
        "memory": (300 + 100 * i) << 20, "memory_limit": 1 << 30, "restarts": i})) for i, r in enumerate(plain)]

    class Panel(App[None]):
        def compose(self) -> ComposeResult:
            yield ProcessesPanel()

    app = Panel()
    async with app.run_test(size=(120, 12)) as pilot:
        panel = app.query_one(ProcessesPanel)
        panel.show(plain)
        await pilot.pause()
        assert [c.key for c in panel.table.COLUMNS][-1] == "leases"  # a plain shared crawl: as it was
        panel.show(tabs)
        await pilot.pause()
        assert [c.key for c in panel.table.COLUMNS][-1] == "chromium"
        ends = [panel.table.line_of(r.proc).rstrip().rsplit("  ", 1)[-1].strip() for r in tabs]
        assert ends == ["300M r0", "400M r1", "-"]  # as `ls` writes it; a lost engine's is not current
