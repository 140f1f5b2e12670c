"""Crawlee for Python's PlaywrightCrawler on bench/js_site.py, waiting as `crawltop --browser`
waits: the network idle, a scroll to the bottom, idle again; then the links of the final DOM.
Run by bench/browser.py in its own venv (bench/_work/crawlee-venv).

    crawlee_spider.py URL CONCURRENCY CHROMIUM
"""
from __future__ import annotations

import asyncio
import sys

from crawlee import ConcurrencySettings
from crawlee.crawlers import PlaywrightCrawler, PlaywrightCrawlingContext

# Chromium's own background traffic off, as crawltop runs it: the crawl talks only to the site.
FLAGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--metrics-recording-only", "--no-first-run", "--disable-default-apps", "--disable-dev-shm-usage"]


async def main(url: str, concurrency: int, chromium: str) -> None:
    crawler = PlaywrightCrawler(
        browser_type="chromium", headless=True,
        browser_launch_options={"executable_path": chromium, "args": FLAGS},
        concurrency_settings=ConcurrencySettings(min_concurrency=concurrency, max_concurrency=concurrency,
                                                 desired_concurrency=concurrency),
        max_request_retries=0,
        # A context of its own for each page (crawltop: a new tab of one profile), and no made-up fingerprints.
        use_incognito_pages=True, fingerprint_generator=None,
    )
    pages = 0

    @crawler.router.default_handler
    async def handle(ctx: PlaywrightCrawlingContext) -> None:
        nonlocal pages
        await ctx.page.wait_for_load_state("networkidle")
        await ctx.page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        await ctx.page.wait_for_load_state("networkidle")
        await ctx.enqueue_links()
        pages += 1

    await crawler.run([url])
    print(f"pages {pages}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
