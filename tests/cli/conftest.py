"""tests/cli/: the crawltop command as a user runs it (exit codes, report, resume after
kill -9, secrets). Its fixtures are tests/conftest.py's `serve` and `redis_url`; helpers are
in tests/support/ (crawl, sites, proxy, cluster, trapsite)."""
