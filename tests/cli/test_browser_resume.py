"""`resume` of a crawl made with --browser: its state keeps the browser and its settings, and
a --browser-path given to the resume names this machine's Chromium (a state file moved to
another machine), kept for the next resume. Real state files; the browser itself starts
only in a crawl (tests/engine/test_browser.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from crawltop.cli.main import build_parser
from crawltop.cli.state_file import overrides_from
from crawltop.core.config import CrawlConfig
from crawltop.core.storage.open_state import open_state


def resumed(state: Path, *given: str) -> CrawlConfig:
    argv = ["resume", str(state), *given]
    config, store = open_state(str(state), None, overrides_from(build_parser().parse_args(argv), argv),
                               resume_only=True)
    store.close()
    return config


def test_a_resume_runs_the_browser_with_the_path_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    state = tmp_path / "s.db"
    made = CrawlConfig(roots=("http://127.0.0.1:9/",), browser=True, browser_path="/elsewhere/chromium",
                       browser_quiet=0.3, browser_restart=7)
    _, store = open_state(str(state), made, {})
    store.close()
    config = resumed(state)
    assert (config.browser, config.browser_path, config.browser_quiet, config.browser_restart) == \
        (True, "/elsewhere/chromium", 0.3, 7)
    config = resumed(state, "--browser-path", "bin/chromium")  # relative to where it is typed
    assert (config.browser, config.browser_path, config.browser_quiet) == (True, str(tmp_path / "bin/chromium"), 0.3)
    assert resumed(state).browser_path == str(tmp_path / "bin/chromium")  # kept for the next resume
