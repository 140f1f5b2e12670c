"""tests/tui/: the Textual app, headless under Pilot against real crawls, its snapshots
(__snapshots__/test_tui_snapshots/, beside their module) and its terminal writer. Its
fixture is tests/conftest.py's `serve`; helpers are in tests/support/ (tui, sites, wait)."""
