"""The Scrapy side of bench/politeness.py: a polite crawl of many hosts from several roots.

Run inside bench/_work/scrapy-venv (politeness.py creates it and installs scrapy):

    bench/_work/scrapy-venv/bin/scrapy runspider bench/scrapy_hosts_spider.py \
        -a roots=http://127.0.0.2:8770/,http://127.0.0.3:8770/ -a scope=roots \
        -s DOWNLOAD_DELAY=0.25 -s CONCURRENT_REQUESTS=20

bench/scrapy_spider.py takes one root and keeps to its host; this one takes a list of
roots (`roots`, comma separated) and either keeps to the roots' hosts (`scope=roots`) or
follows links anywhere (`scope=any`, for cross-host links). Politeness is Scrapy's own:
one download slot per hostname (here the hosts are IP addresses, so a slot is an
address), DOWNLOAD_DELAY between two requests of a slot, CONCURRENT_REQUESTS_PER_DOMAIN
in flight per slot. The harness passes the figures with `-s`, which override the
defaults below. Nothing is written: politeness.py counts every request at the server.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class HostsSpider(CrawlSpider):
    name = "hosts"
    custom_settings = {
        "CONCURRENT_REQUESTS": 20,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0.25,
        "DOWNLOAD_DELAY_JITTER": 0,          # Scrapy >= 2.14
        "RANDOMIZE_DOWNLOAD_DELAY": False,   # older Scrapy
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
    }
    rules = (Rule(LinkExtractor(), follow=True),)

    def __init__(self, roots: str = "http://127.0.0.2:8770/", scope: str = "roots", *a, **kw):
        self.start_urls = [r for r in roots.split(",") if r]
        if scope == "roots":
            self.allowed_domains = sorted({urlsplit(r).hostname or "" for r in self.start_urls})
        elif scope != "any":
            raise ValueError(f"scope must be roots or any, not {scope!r}")
        super().__init__(*a, **kw)
