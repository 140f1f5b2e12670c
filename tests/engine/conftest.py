"""tests/engine/: the engine in this process (crawl, hosts, sitemaps, provenance, steering,
the SQLite store, the demo site) against real aiohttp servers on loopback addresses. Its
fixture is tests/conftest.py's `serve`; helpers are in tests/support/ (sites, crawl, wait)."""
