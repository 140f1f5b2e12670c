"""Changing a running crawl: live ignores, seeds, per-host pause and delay (`steer.py`,
the component the Crawler holds), on linear-time patterns."""
