"""The scrapy-redis peer of bench/redis_scale.py: bench/scrapy_spider.py's CrawlSpider, with
its scheduler, dupefilter and start URL in a shared Redis, so N processes crawl one site.

Run inside bench/_work/scrapy-venv (redis_scale.py installs scrapy-redis there), one
command per process, after pushing the root as JSON to the start key:

    redis-cli -s SOCK LPUSH bench:start_urls '{"url": "http://127.0.0.1:8765/"}'
    bench/_work/scrapy-venv/bin/scrapy runspider bench/scrapy_redis_spider.py \
        -a root=http://127.0.0.1:8765/ -a out=p1.txt -s REDIS_URL=unix://SOCK

Same settings as bench/scrapy_spider.py (robots off, concurrency 20 overall and per
domain per process, log level WARNING, same host only, no depth limit, Scrapy's
defaults otherwise) plus scrapy-redis's defaults (its priority queue, its RFPDupeFilter)
except:
- SCHEDULER_PERSIST on: without it the first process to go idle and close deletes the
  shared queue and dupefilter under the process still crawling. The server is private
  and thrown away, so nothing is left behind.
- MAX_IDLE_TIME_BEFORE_CLOSE (default here 5 s, `-a idle=S`): scrapy-redis never
  finishes on its own; a process closes at its first idle check that many seconds
  after its start URL key was last non-empty. That wait is not crawling, so the bench
  takes the crawl's end from the last response, not from the process's exit.

Every downloaded response (any status; `response_received`, before middlewares drop
404s or follow 301s) is written as `epoch_seconds status html url`, so the harness can
count pages, distinct URLs and duplicates, and find the time of the last response.
"""
from __future__ import annotations

import time
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import Rule
from scrapy_redis.spiders import RedisCrawlSpider


class BenchRedisSpider(RedisCrawlSpider):
    name = "bench"
    redis_key = "bench:start_urls"
    custom_settings = {
        "CONCURRENT_REQUESTS": 20,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 20,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
    }
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def __init__(self, root: str = "http://127.0.0.1:8765/", out: str = "scrapy_redis_urls.txt",
                 idle: str = "5", *a, **kw):
        self.allowed_domains = [urlsplit(root).hostname]
        self.max_idle_time = int(idle)
        self._out = open(out, "w", encoding="utf-8")
        super().__init__(*a, **kw)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._received, signal=signals.response_received)
        return spider

    def _received(self, response, request, spider) -> None:
        ctype = response.headers.get(b"Content-Type", b"").decode("latin-1").lower()
        html = int(response.status == 200 and "html" in ctype)
        self._out.write(f"{time.time():.6f} {response.status} {html} {response.url}\n")

    def parse_start_url(self, response):
        return []

    def parse_item(self, response):
        return None

    def closed(self, reason: str) -> None:
        self._out.close()
