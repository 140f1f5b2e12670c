"""The monitor of a crawl shared through Redis: the whole crawl, every process, from
any machine (`attach --redis`, and the screen of `crawl --processes`)."""
from __future__ import annotations

import asyncio
import json

from ..core.cluster import connect as cluster
from ..core.cluster.keys import Keys
from ..core.cluster.view import ClusterView
from ..core.errors import UsageError
from .hangup import Hangup


def run_monitor(url: str, name: str, *, exit_on_finish: bool = False, on_hangup: Hangup | None = None) -> int:
    from ..tui.app import CrawlApp

    async def run() -> int:
        r = cluster.client(url, linked=True)  # the view's Link bounds its calls (core/cluster/link.py)
        try:
            try:
                async with asyncio.timeout(10):
                    roots = json.loads(await r.hget(Keys(name).meta, "roots") or b"[]")
            except TimeoutError:
                raise UsageError(f"Redis at {url} did not answer in 10 s") from None
            app = CrawlApp(ClusterView(r, name, roots), exit_on_finish=exit_on_finish, hangup=on_hangup)
            await app.run_async()
        finally:
            await r.aclose()
        return app.return_code or 0

    return asyncio.run(run())
