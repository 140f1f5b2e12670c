"""`python -m crawltop.demo.serve [--fast]`: serve the demo site and print its URL on stdout.

The CLI runs this as a child process so the site never competes with the crawler
for the event loop or the GIL.
"""
from __future__ import annotations

import argparse
import asyncio
import sys

from .site import DemoSite


async def _serve(fast: bool) -> None:
    async with DemoSite(fast=fast) as site:
        print(site.url, flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m crawltop.demo.serve")
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args()
    try:
        asyncio.run(_serve(args.fast))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
