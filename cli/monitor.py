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
    return asyncio.run(monitor_async(url, name, exit_on_finish=exit_on_finish, on_hangup=on_hangup))


async def monitor_async(url: str, name: str, *, exit_on_finish: bool = False, on_hangup: Hangup | None = None,
                        from_list: bool = False, headless: bool = False) -> int:
    """The monitor of shared crawl NAME on the running loop (`from_list`: opened from the
    dashboard, cli/commands/top.py; esc or d go back to it)."""
    from ..tui.app import CrawlApp

    r = cluster.client(url, linked=True)  # the view's Link bounds its calls (core/cluster/link.py)
    try:
        try:
            async with asyncio.timeout(10):
                roots = json.loads(await r.hget(Keys(name).meta, "roots") or b"[]")
        except TimeoutError:
            raise UsageError(f"Redis at {url} did not answer in 10 s") from None
        app = CrawlApp(ClusterView(r, name, roots), exit_on_finish=exit_on_finish, hangup=on_hangup,
                       from_list=from_list)
        await app.run_async(headless=headless)
    finally:
        await r.aclose()
    return app.return_code or 0
