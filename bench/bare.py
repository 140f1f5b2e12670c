"""The ceiling of the stack: a bare aiohttp + selectolax crawler with no features.

    .venv/bin/python bench/bare.py http://127.0.0.1:8765/ -c 20 --out urls.txt

A queue, N workers, a seen set and urljoin: no robots, no retries, no records, no
stats, no canonicalisation beyond dropping the fragment, no per-host anything.
aiohttp follows redirects itself. Every href is joined, the naive way, with no
per-page de-duplication. Same host only. It writes the URL of every HTML page
(status 200, text/html) it fetched to --out, one per line, and prints one JSON line
with its counts on stdout.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from urllib.parse import urldefrag, urljoin, urlsplit

import aiohttp
from selectolax.lexbor import LexborHTMLParser


async def crawl(root: str, concurrency: int, max_pages: int | None) -> dict:
    host = urlsplit(root).netloc
    queue: asyncio.Queue[str] = asyncio.Queue()
    seen = {root}
    queue.put_nowait(root)
    html_pages: list[str] = []
    counts = {"requests": 0, "errors": 0, "links": 0, "bytes": 0}

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while True:
                url = await queue.get()
                try:
                    if max_pages is not None and counts["requests"] >= max_pages:
                        continue
                    counts["requests"] += 1
                    async with session.get(url) as resp:
                        body = await resp.read()
                        counts["bytes"] += len(body)
                        final = str(resp.url)
                        seen.add(final)
                        if resp.status != 200 or not resp.content_type.startswith("text/html"):
                            continue
                        html_pages.append(final)
                    tree = LexborHTMLParser(body)
                    for a in tree.css("a[href]"):
                        href = a.attributes.get("href")
                        if href is None:
                            continue
                        counts["links"] += 1
                        link = urldefrag(urljoin(final, href.strip()))[0]
                        if link not in seen and urlsplit(link).netloc == host:
                            seen.add(link)
                            queue.put_nowait(link)
                except Exception:  # noqa: BLE001 - a bare loop: count and move on
                    counts["errors"] += 1
                finally:
                    queue.task_done()

        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await queue.join()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    counts["html_pages"] = len(html_pages)
    counts["pages"] = html_pages  # popped by main
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--max-pages", type=int, default=None)
    ap.add_argument("--out", default=None, help="write fetched HTML page URLs here")
    ap.add_argument("--uvloop", action="store_true",
                    help="run on uvloop (not a feature of the stack: shows what a faster loop buys)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.uvloop:
        import uvloop

        counts = uvloop.run(crawl(a.root, a.concurrency, a.max_pages))
    else:
        counts = asyncio.run(crawl(a.root, a.concurrency, a.max_pages))
    elapsed = time.perf_counter() - t0
    pages = counts.pop("pages")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write("\n".join(pages) + "\n")
    counts["elapsed_s"] = round(elapsed, 3)
    json.dump(counts, sys.stdout)
    print()


if __name__ == "__main__":
    main()
