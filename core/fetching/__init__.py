"""Where a URL is fetched: one HTTP attempt and its retry policy (`fetch.py`), the one
session (headers, proxy, cookies), robots.txt before a host's first page, and sitemaps,
found per origin and read safely."""
