"""tests/control/: crawls in real crawltop processes steered over their sockets: the control
protocol, detach and attach, ctl, a hung-up terminal, the web monitor. Its fixtures are
tests/conftest.py's `site` and `rundir` (the cluster tests use them too); helpers are in
tests/support/ (ctl, browser)."""
