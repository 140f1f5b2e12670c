"""A request's steps, as they happen, for the worker that asked: without aiohttp's tracing.

* politeness counts a gap from when a request really leaves (`sent`), not from when a
  worker asked for it: a busy loop or a new connection can stand between the two;
* a worker's phase says what it waits for: a free connection (`pool`), a new
  one (`connecting`: DNS, TCP, TLS), `sending`, the response's `headers`; on a keep-alive
  connection the fetch goes straight from sending to headers.

Any TraceConfig makes aiohttp build a Trace and send every one of its signals on every
request, about 3% of a crawl's CPU (BENCHMARKS.md, "Speed on one core"). These hooks cost a
ContextVar read at the three steps that matter. They override two of aiohttp's private
methods; where a version lacks one, that phase is not shown and nothing else changes.
"""
from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp import ClientRequest

Sent = Callable[[], None]
Phase = Callable[[str], None]
# (sent, phase) of the request the current task is making (core/fetching/fetch.py fetch_once)
HOOKS: ContextVar[tuple[Sent | None, Phase | None] | None] = ContextVar("crawltop_request_hooks", default=None)


def _phase(name: str) -> None:
    hooks = HOOKS.get()
    if hooks is not None and hooks[1] is not None:
        hooks[1](name)


class StepConnector(aiohttp.TCPConnector):
    """Says `pool` while a request waits for a free connection, `connecting` while a new one
    is made, and `sending` after either."""

    async def _wait_for_available_connection(self, *args: Any, **kwargs: Any) -> None:
        _phase("pool")
        await super()._wait_for_available_connection(*args, **kwargs)
        _phase("sending")

    async def _create_connection(self, *args: Any, **kwargs: Any) -> Any:
        _phase("connecting")
        result = await super()._create_connection(*args, **kwargs)
        _phase("sending")
        return result


class StepRequest(ClientRequest):
    """Calls `sent` and says `headers` once the request's headers are written."""

    async def send(self, conn: Any) -> Any:
        resp = await super().send(conn)
        hooks = HOOKS.get()
        if hooks is not None:
            sent, phase = hooks
            if sent is not None:
                sent()
            if phase is not None:
                phase("headers")
        return resp
