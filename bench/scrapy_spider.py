"""The Scrapy side of bench/compare.py: a CrawlSpider with a LinkExtractor.

Run inside bench/_work/scrapy-venv (compare.py creates it and installs scrapy):

    bench/_work/scrapy-venv/bin/scrapy runspider bench/scrapy_spider.py \
        -a root=http://127.0.0.1:8765/ -a out=urls.txt -s CONCURRENT_REQUESTS=20

Settings are Scrapy's defaults except: robots.txt off, concurrency 20 overall and per
domain (the per-domain default of 8 would cap it), log level WARNING, same host only,
no depth limit. The callback writes the URL of every HTML page (200, text/html).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class BenchSpider(CrawlSpider):
    name = "bench"
    custom_settings = {
        "CONCURRENT_REQUESTS": 20,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 20,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
    }
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def __init__(self, root: str = "http://127.0.0.1:8765/", out: str = "scrapy_urls.txt", *a, **kw):
        self.start_urls = [root]
        self.allowed_domains = [urlsplit(root).hostname]
        self._out = open(out, "w", encoding="utf-8")
        super().__init__(*a, **kw)

    def _record(self, response) -> None:
        ctype = response.headers.get(b"Content-Type", b"").decode("latin-1").lower()
        if response.status == 200 and "html" in ctype:
            self._out.write(response.url + "\n")

    def parse_start_url(self, response):
        self._record(response)
        return []

    def parse_item(self, response):
        self._record(response)
        return None

    def closed(self, reason: str) -> None:
        self._out.close()
