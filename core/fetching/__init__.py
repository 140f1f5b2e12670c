"""Where a URL is fetched: a URL's attempt, its retries and its host's failures
(`attempt.py`), one HTTP GET and the retry policy's numbers (`fetch.py`), the fetchers
(`fetcher.py`, `browser.py`), the one session (headers, proxy, cookies), robots.txt before a
host's first page, and sitemaps, found per origin and read safely."""
