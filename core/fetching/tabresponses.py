"""The Response stage of a browser tab's requests: a claimed URL's answer recorded, a kept
one kept, then handed to the page.

Apart from the Request stage's rules (core/fetching/tabroutes.py) because this is the other
half of a request's pause, asked for only when the crawl records or keeps the answer
(`interceptResponse`): status, reason, headers, the request's method and the headers it
really went out with, its body read as a stream and cut at --max-bytes (core/fetching/devtools.py
`body`). A body that cannot be read whole fails the load with a reason in words, and the
page's request with it: a Record never calls a part, or nothing, a whole answer.
"""
from __future__ import annotations

from typing import Any

from .browserlife import BrowserLife
from .devtools import BodyLost, DevTools, Paused, bodyless
from .fetch import Response
from .pagedone import Traffic
from .tabanswer import answer
from .tabclaims import Flow, TabClaims
from .tabshare import Kept, Shared


class TabResponses(TabClaims):
    """What a tab does with the answers it paused; `traffic` counts the bytes handed to it."""

    def __init__(self, browser: BrowserLife, answers: Shared, url: str, resp: Response) -> None:
        super().__init__(browser, answers, url, resp)
        self.traffic: Traffic | None = None

    async def _answered(self, devtools: DevTools, p: Paused) -> None:
        """The Response stage: a claimed URL's answer recorded, then handed to the page."""
        flow = self.flows.get(p.network)
        loaded = flow.loaded if flow is not None else None
        if flow is not None and loaded is None and flow.share is not None and p.error is None and p.status is not None:
            await self._keep(devtools, p, flow)
            return
        if flow is None or loaded is None or p.error is not None or p.status is None:
            self.wire.pop(p.network, None)
            if flow is not None:
                self._release(flow, p.status, p.header("retry-after"))
                self._end(flow, f"the browser's request failed: {p.error}")  # its share's waiters go on
            # not the crawl's to record, or failed: on to the page as it came
            await devtools.proceed(p.id)
            return
        status = p.status
        redirect = 300 <= status < 400 and bool(p.header("location"))
        body, cut = b"", False
        if not (redirect or bodyless(status, p.method)):
            try:
                body, cut = await devtools.body(p.id, self.browser.max_bytes, p.length)
            except BodyLost as exc:
                await self._lost(devtools, p, flow, exc)
                return
        self._release(flow, status, p.header("retry-after"))  # the answer is in: the host's slot goes back
        sent = await self._as_sent(p.network, flow.sent)
        if self.closed:  # settled meanwhile: its Record already says why
            await devtools.fail(p.id)
            return
        r = loaded.response = answer(status, p.reason, p.response_headers, sent, p.method, body, cut)
        if flow.share is not None:  # only a whole 2xx is served again: an error or a cut body is asked anew
            whole = 200 <= status < 300 and not cut
            self.answers.kept(loaded.url, flow.share, Kept(status, p.response_headers, r.body) if whole else None)
        self._end(flow, None)
        if redirect:
            await devtools.proceed(p.id)  # Chromium follows it: its target comes back to `_hop`
            return
        await self._fulfill(devtools, p.id, status, p.response_headers, body, p.reason)

    async def _keep(self, devtools: DevTools, p: Paused, flow: Flow) -> None:
        """An unrecorded answer (a URL seen before, claimed by another engine) that this
        browser's later tabs will want: a whole 2xx is kept and served to them (the server
        sees one request per engine), anything else goes on to the page as it came."""
        status = p.status
        assert status is not None and flow.share is not None
        self.wire.pop(p.network, None)
        if not 200 <= status < 300:
            self._release(flow, status, p.header("retry-after"))
            self._end(flow, None)
            await devtools.proceed(p.id)
            return
        body, cut = b"", False
        if not bodyless(status, p.method):
            try:
                body, cut = await devtools.body(p.id, self.browser.max_bytes, p.length)
            except BodyLost as exc:
                await self._lost(devtools, p, flow, exc)
                return
        self._release(flow, status, p.header("retry-after"))
        share, flow.share = flow.share, None
        self.answers.kept(flow.url, share, None if cut else Kept(status, p.response_headers, body))
        if self.closed:
            await devtools.fail(p.id)
            return
        await self._fulfill(devtools, p.id, status, p.response_headers, body, p.reason)

    async def _lost(self, devtools: DevTools, p: Paused, flow: Flow, exc: BodyLost) -> None:
        """The answer's body could not be read: the load failed (its Record says why, no
        tab is served it), and so does the request in the page, as its network failed."""
        self.wire.pop(p.network, None)
        self._release(flow, None)
        self._end(flow, f"the browser could not read the answer's body: {exc}")
        await devtools.fail(p.id, "Failed")

    async def _fulfill(self, devtools: DevTools, rid: str, status: int, headers: Any, body: bytes,
                       phrase: str = "") -> None:
        if self.traffic is not None:
            self.traffic.bytes += len(body)
        await devtools.fulfill(rid, status, headers, body, phrase)
