"""The command reference can't drift from --help: docs/reference/*.md and README.md's option
table are made from the parser (cli/reference.py), and this fails when one is out of date."""
from __future__ import annotations

import argparse

from crawltop.cli import reference


def test_every_generated_page_is_up_to_date() -> None:
    stale = [str(path.relative_to(reference.ROOT)) for path, text in reference.pages().items()
             if not path.exists() or path.read_text() != text]
    assert stale == [], f"out of date (run `make reference`): {stale}"


def test_every_option_of_every_command_is_in_its_page_with_help_s_words() -> None:
    for name, parser in reference.commands().items():
        text = (reference.ROOT / "docs" / "reference" / f"{name}.md").read_text()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            for flag in action.option_strings:
                assert f"`{flag}" in text, (name, flag)
            first_words = " ".join(parser._get_formatter()._expand_help(action).split()[:4]).replace("|", "\\|")
            assert first_words in text, (name, action.dest, first_words)


def test_readme_holds_the_crawl_table_between_its_markers() -> None:
    readme = (reference.ROOT / "README.md").read_text()
    block = readme[readme.index(reference.README_BEGIN):readme.index(reference.README_END)]
    for flag in ("--concurrency", "--redis", "--processes", "--name", "--detach", "--max-tries", "--exclude"):
        assert f"`{flag}" in block, flag


def test_a_changed_help_line_makes_the_readme_stale() -> None:
    readme = (reference.ROOT / "README.md").read_text()
    table = reference.options_table(reference.commands()["crawl"])
    assert reference.with_table(readme, table) == readme
    assert reference.with_table(readme, table.replace("--max-tries", "--most-tries")) != readme


def test_the_key_reference_has_every_key_of_both_tables_and_when_it_runs() -> None:
    """docs/reference/keys.md comes from tui/actions.py: every row's key and words, and for the
    monitor and the dashboard alike the words of the predicate that decides when it runs (they
    sit beside its code)."""
    from crawltop.tui.actions import ACTIONS, top_actions

    text = (reference.ROOT / "docs" / "reference" / "keys.md").read_text()
    monitor, dashboard = text.split("## The dashboard")
    for row in ACTIONS:
        line = next(ln for ln in monitor.splitlines() if ln.startswith(f"| `{row.shown_key}`")
                    and row.description[1:] in ln)
        assert row.enabled.words in line or row.enabled.words == "always", row.id
    for row in top_actions():
        line = next(ln for ln in dashboard.splitlines() if ln.startswith(f"| `{row.shown_key}`")
                    and row.description[1:] in ln)
        assert row.enabled.words in line or row.enabled.words == "always", row.id
    assert "| while the selected crawl runs; not while typing the filter |" in dashboard  # the dashboard's own words


def test_a_changed_key_or_predicate_makes_the_key_reference_stale() -> None:
    from dataclasses import replace

    from crawltop.tui.actions import ACTIONS, Enabled

    page = (reference.ROOT / "docs" / "reference" / "keys.md").read_text()
    assert reference.keys_page() == page
    moved = (replace(ACTIONS[0], key="z"), *ACTIONS[1:])
    assert reference.keys_page(moved) != page
    reworded = (replace(ACTIONS[0], enabled=Enabled("never", lambda now: False)), *ACTIONS[1:])
    assert "| never |" in reference.keys_page(reworded)
