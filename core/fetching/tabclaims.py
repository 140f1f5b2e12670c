"""What one browser tab claimed for the crawl, and what each of its requests holds meanwhile.

Apart from the rules that decide each request (core/fetching/tabroutes.py) because this is
the bookkeeping those decisions leave, whatever the protocol said: every URL the tab claimed
ends with an answer or a reason (`settle`), other tabs waiting on a shared load are woken
(core/fetching/tabshare.py), the tab knows when its claims are all answered, each request's
turn on its host is given back once (core/fetching/tabturns.py), and the crawl's credentials
go only where its rule says (core/fetching/session.py): `--header`'s Authorization and
Cookie only to the roots' hosts (or --header-host's); what each request really went out
with (Chromium's network stack adds its cookies, Host, Accept-Encoding) is told apart, on
the session's `Network` events, and is what its record keeps.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from .browserlife import BrowserLife
from .devtools import wire_headers
from .fetch import Loaded, Response
from .tabshare import Kept, Shared
from .tabturns import TURN_SHARE, Turn

_CREDENTIALS = frozenset(("authorization", "cookie", "proxy-authorization"))
WIRE_WAIT = 2.0  # seconds an answer waits for its request's headers as sent (events lag under load)


class Flow:
    """One request of the tab across its redirects: what it records now (None: nothing),
    the share other tabs wait on, its hops, the headers it went out with, its host's turn."""

    __slots__ = ("loaded", "share", "hops", "sent", "counted", "turn", "url")

    def __init__(self) -> None:
        self.turn: Turn | None = None  # its host's turn, held until its answer is in
        self.url = ""  # where it goes now (each hop moves it)
        self.loaded: Loaded | None = None
        self.share: asyncio.Future[Kept | None] | None = None
        self.hops = 0
        self.sent: list[tuple[str, str]] = []
        self.counted = False  # one of the tab's claims still waiting for its answer


class TabClaims:
    """A tab's claims and its requests' flows (by network id: a request and its redirects)."""

    def __init__(self, browser: BrowserLife, answers: Shared, url: str, resp: Response) -> None:
        self.browser, self.answers, self.url, self.resp = browser, answers, url, resp
        self.claimed: list[tuple[Loaded, asyncio.Future[Kept | None] | None]] = []
        self.loaded: list[Loaded] = resp.loaded if resp.loaded is not None else []
        self.closed = False  # the page is being closed: nothing more is claimed
        self.flows: dict[str, Flow] = {}
        # the first part of the hard limit, in which requests wait for their hosts' turns
        self.until = asyncio.get_running_loop().time() + browser.limit * TURN_SHARE
        self._claims = 0  # claimed loads still in flight
        self._claims_done = asyncio.Event()
        self._claims_done.set()
        self.wire: dict[str, list[tuple[str, str]]] = {}  # network id -> its request's headers as sent
        self._late: dict[str, int] = {}  # network id -> hops whose headers were given up on: dropped when they come
        self._wire_came = asyncio.Event()
        self._asking: set[asyncio.Future[bool]] = set()  # claims sent and not yet answered
        self._asked = asyncio.Event()  # none is
        self._asked.set()

    async def _claimed(self, claim: Awaitable[bool], then: Callable[[], None]) -> bool:
        """`claim` (the crawl's `Rules.claim`), and `then` (its bookkeeping: the URL's Loaded
        in the tab's claims) the moment it says yes, whatever becomes of the request that
        asked. Shielded: on Redis the URL may be seen there once the call is sent, so a tab
        closing mid-way (its tasks cancelled) must not lose a yes, or the URL would be seen
        and never recorded. The tab's close waits for these (`claims_landed`)."""
        fut = asyncio.ensure_future(claim)
        self._asking.add(fut)
        self._asked.clear()

        def landed(done: asyncio.Future[bool]) -> None:
            self._asking.discard(done)
            if not self._asking:
                self._asked.set()
            if not done.cancelled() and done.exception() is None and done.result():
                then()

        fut.add_done_callback(landed)
        return await asyncio.shield(fut)

    async def claims_landed(self, limit: float) -> None:
        """Wait (at most `limit` seconds) for the claims still being asked, so each yes is
        in the tab's claims before they are settled."""
        if self._asking:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._asked.wait(), limit)

    def _claim(self, flow: Flow, loaded: Loaded, share: asyncio.Future[Kept | None] | None) -> None:
        if self.closed and loaded.error is None:  # its yes came as the tab closed: it never went out
            loaded.error = "the page was closed before it was requested"
        flow.loaded, flow.share = loaded, share
        self.claimed.append((loaded, share))
        self.loaded.append(loaded)
        if not flow.counted:
            flow.counted = True
            self._claims += 1
            self._claims_done.clear()

    def _skipped(self, loaded: Loaded) -> None:
        """A URL claimed for a Record that says why it was never requested (`loaded.error`)."""
        self.claimed.append((loaded, None))
        self.loaded.append(loaded)

    def _end(self, flow: Flow, why: str | None) -> None:
        """The claim has its answer (or `why` not): other tabs waiting on it go on."""
        loaded = flow.loaded
        if why is not None and loaded is not None and loaded.response is None and loaded.error is None:
            loaded.error = why
        if flow.share is not None:
            self.answers.kept(loaded.url if loaded else flow.url, flow.share, None)  # no-op once answered
            flow.share = None
        if flow.counted:
            flow.counted = False
            self._claims -= 1
            if not self._claims:
                self._claims_done.set()

    async def _turn(self, flow: Flow, url: str) -> bool:
        """Wait for the host's turn (core/fetching/tabturns.py); False: not to go out."""
        flow.url = url
        turn = await self.browser.turns.take(url, self.url, self.until)
        if turn is False or self.closed:
            if isinstance(turn, Turn):
                flow.turn = turn
                self._release(flow, None, used=False)
            return False
        if isinstance(turn, Turn):
            flow.turn = turn
        return True

    def _release(self, flow: Flow, status: int | None, retry: str | None = None, used: bool = True) -> None:
        """The request's turn on its host ends (once): the answer's status tells the host."""
        turn, flow.turn = flow.turn, None
        if turn is not None:
            turns = self.browser.turns
            if used:
                turns.done(turn, status, retry)
            else:
                turns.unused(turn)

    def gone(self, url: str) -> None:
        """The page gave a request up while it was out (an aborted fetch(), a removed image):
        no answer will be paused for it, so its turn on its host ends here."""
        for flow in self.flows.values():
            if flow.turn is not None and flow.url == url:
                self._release(flow, None)
                self._end(flow, "the page gave the request up before its answer came")
                return

    async def _headers(self, url: str, tabs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers a request to `url` goes with: the tab's (Chromium adds the browser's
        cookies), or, for a host --header's credentials are for, the tab's with them added
        and the browser's cookies merged into one Cookie header."""
        creds = self.browser.credentials(url)
        context = self.browser.context
        if not creds or context is None:
            return tabs
        out = [(n, v) for n, v in tabs if n.lower() not in _CREDENTIALS]
        out += [(n, v) for n, v in creds if n.lower() != "cookie"]
        cookies = [v for n, v in creds if n.lower() == "cookie"]
        cookies += [f"{c['name']}={c['value']}" for c in await context.cookies(url)]
        if cookies:
            out.append(("Cookie", "; ".join(cookies)))
        return out

    def _on_wire(self, event: dict[str, Any]) -> None:
        """The headers a request went out with (each redirect hop's in turn: the next hop
        leaves only once this one's answer was handled)."""
        network, headers = wire_headers(event)
        late = self._late.get(network, 0)
        if late:  # a hop given up on: its headers are not the next hop's
            self._late[network] = late - 1
            return
        self.wire[network] = headers
        came, self._wire_came = self._wire_came, asyncio.Event()
        came.set()

    def _on_response(self, event: dict[str, Any]) -> None:
        """A request's answer came (or it failed) with no pause at the Response stage (it goes
        out unrecorded): its turn on its host ends here, the answer telling the host what
        it says. A paused one has ended its turn already (no-op)."""
        network = str(event.get("requestId", ""))
        flow = self.flows.get(network)
        if flow is None or flow.turn is None or flow.loaded is not None or flow.share is not None:
            return
        self.wire.pop(network, None)
        response = event.get("response") or {}
        status = response.get("status")
        headers = response.get("headers") or {}
        retry = next((str(v) for k, v in headers.items() if str(k).lower() == "retry-after"), None)
        self._release(flow, int(status) if isinstance(status, int | float) else None, retry)

    async def _as_sent(self, network: str, fallback: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers the request really went out with, as Chromium's network stack sent
        them (its cookies, Host, Accept-Encoding; secrets are redacted by the archive, as on
        the aiohttp path); if they are not told within WIRE_WAIT, those the tab set."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WIRE_WAIT
        while (got := self.wire.pop(network, None)) is None:
            came, left = self._wire_came, deadline - loop.time()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(came.wait(), left)
            except TimeoutError:
                break
        else:
            return got
        self._late[network] = self._late.get(network, 0) + 1
        return fallback

    def settle(self, why: str) -> None:
        """Every URL this tab claimed ends with an answer or a reason."""
        for loaded, fut in self.claimed:
            if loaded.response is None and loaded.error is None:
                loaded.error = why
            if fut is not None:
                self.answers.kept(loaded.url, fut, None)
        for flow in self.flows.values():  # an unrecorded load other tabs wait on: they ask anew
            if flow.share is not None:
                self.answers.kept(flow.url, flow.share, None)
                flow.share = None
