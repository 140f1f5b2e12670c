"""The DevTools protocol's `Fetch` domain for one tab: every request paused, the crawl decides.

Apart from the crawl's rules (core/fetching/tabroutes.py) because this is only the protocol:
how interception is enabled, what a paused request looks like, and the few ways to let one
go. Chromium's own network stack sends every request (its proxy, its connections, its
cookies); a request is paused before it leaves (the Request stage: the crawl's rules, its
claim, its credentials) and, when the crawl records or keeps its answer, once its response
headers are in (the Response stage, asked for per request with `interceptResponse`: the
answer is recorded, its body read as a stream, then handed to the page).

- Not Playwright's `page.route`: Playwright enables `Fetch` on its own session only while a
  route, HTTP credentials or proxy credentials exist (its crNetworkManager); the crawl uses
  none of them, so the tab's requests are paused once, on this session alone, and never
  answered by Playwright's HTTP stack in its driver.
- Not `Network.getResponseBody` after the fact: a body is lost once the page navigates, and
  comes whole; `Fetch.takeResponseBodyAsStream` reads it in chunks, cut at --max-bytes, so a
  huge body costs at most the cap. A taken stream cannot be continued as it was: the page is
  handed the bytes read (`fulfill`). A small body whose headers give its plain length (up to
  WHOLE) is taken in one `Fetch.getResponseBody` while still paused: the same bytes, one
  round trip instead of four.
- Popups are blocked by Chromium and Playwright's own interception stays off: with both
  sessions pausing, every request would be paused twice over, and Playwright's route for
  pages nobody asked for would refuse the tab's own.
- The HTTP cache is off on the tab, as Playwright turns it off when it intercepts: an answer
  from the cache would reach the page without a pause at the Response stage.
- `Network` is on for the session for `Network.requestWillBeSentExtraInfo`: the request
  headers Chromium's network stack really sent (its cookies, `Host`, `Accept-Encoding`), which
  the Request stage never sees (`wire_headers`); matched by the network id, as Fetch's. And
  for the end of a request whose answer is not paused (`Network.responseReceived`,
  `Network.loadingFailed`): its host's turn ends there.
"""
from __future__ import annotations

import base64
import contextlib
from typing import TYPE_CHECKING, Any

from .chromium import first_line

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import CDPSession

CHUNK = 1 << 20  # bytes asked of IO.read at a time: a large body streams, never whole in the protocol
# A body whose plain length the headers give, up to this, is taken in one call: a stream costs
# four round trips through Playwright's driver, which a loaded machine makes tenths of a second
WHOLE = 256 << 10
# Every request is paused before it leaves; its response only when the crawl asks for it as
# it lets the request go (`proceed(..., answer=True)`: what it records or keeps), so a request
# going out unrecorded costs one round trip through Playwright's driver, not two
PATTERNS = [{"urlPattern": "*", "requestStage": "Request"}]
REFUSED = "BlockedByClient"  # how a refused request fails in the page (net::ERR_BLOCKED_BY_CLIENT)
_DROP = frozenset(("content-encoding", "content-length", "transfer-encoding"))


class BodyLost(Exception):
    """An answer's body could not be read whole (its connection dropped, the tab closed): the
    load failed, whatever its status said."""


def bodyless(status: int, method: str) -> bool:
    """An answer with no body by HTTP's rules: b"" is all of it."""
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


class Paused:
    """One `Fetch.requestPaused` event: at the Request stage (no `status`, no `error`) or the
    Response stage. `kind` is the resource type in lower case, as Playwright names it
    (document, script, image, fetch, xhr, ...); `network` is the request's id across its
    redirects (each hop is paused again with the same one)."""

    __slots__ = ("id", "url", "method", "headers", "frame", "kind", "network", "download", "redirected",
                 "status", "reason", "response_headers", "error")

    def __init__(self, event: dict[str, Any]) -> None:
        request = event.get("request") or {}
        self.id: str = event["requestId"]
        self.url: str = request.get("url", "")
        self.method: str = request.get("method", "GET")
        self.headers: list[tuple[str, str]] = [(str(k), str(v)) for k, v in (request.get("headers") or {}).items()]
        self.frame: str | None = event.get("frameId")
        self.kind: str = str(event.get("resourceType", "Other")).lower()
        self.network: str = event.get("networkId") or self.id
        # a document with no network id is the download manager's request (a link with
        # `download`, an attachment), not a navigation of the frame
        self.download: bool = self.kind == "document" and not event.get("networkId")
        self.redirected: bool = bool(event.get("redirectedRequestId"))
        self.status: int | None = event.get("responseStatusCode")
        self.reason: str = event.get("responseStatusText") or ""
        self.response_headers: list[tuple[str, str]] = [
            (h["name"], h["value"]) for h in event.get("responseHeaders") or ()]
        self.error: str | None = event.get("responseErrorReason")

    @property
    def answered(self) -> bool:
        """At the Response stage: Chromium has the answer's headers (or its failure)."""
        return self.status is not None or self.error is not None

    def header(self, name: str) -> str | None:
        low = name.lower()
        return next((v for n, v in self.response_headers if n.lower() == low), None)

    @property
    def length(self) -> int | None:
        """The body's size as the headers give it, when that is its size once decoded too
        (no Content-Encoding); else None."""
        if self.header("content-encoding") not in (None, "", "identity"):
            return None
        try:
            return int(self.header("content-length") or "")
        except ValueError:
            return None


class DevTools:
    """The tab's DevTools session, for what the crawl does with a paused request."""

    def __init__(self, session: CDPSession) -> None:
        self.session = session

    async def enable(self, login: tuple[str, str] | None = None) -> str | None:
        """Interception on (the Request stage; a response only when `proceed` asks), the
        cache off; the id of the page's main frame (its navigations are the page's own, or a
        script moving it). With `login`, the proxy's challenges are answered here
        (`authorize`): Playwright would answer them only by turning its own interception on,
        a second pause of every request."""
        send = self.session.send
        # Network only for its events (headers as sent, answers): small buffers, since this
        # session's copies of bodies would count against --browser-memory beside Playwright's
        await send("Network.enable", {"maxTotalBufferSize": 1 << 20, "maxResourceBufferSize": 1 << 18})
        await send("Network.setCacheDisabled", {"cacheDisabled": True})
        await send("Fetch.enable", {"patterns": PATTERNS, "handleAuthRequests": login is not None})
        tree = await send("Page.getFrameTree")
        return ((tree.get("frameTree") or {}).get("frame") or {}).get("id")

    async def proceed(self, rid: str, headers: list[tuple[str, str]] | None = None, answer: bool = False) -> None:
        """Let it go on as it is: out to the network (with these headers instead of the
        page's, when given; with `answer`, its response paused again once its headers are
        in: `interceptResponse`, each redirect hop asked anew), or at the Response stage on
        to the page untouched."""
        params: dict[str, Any] = {"requestId": rid}
        if headers is not None:
            params["headers"] = [{"name": n, "value": v} for n, v in headers]
        if answer:
            params["interceptResponse"] = True
        await self.session.send("Fetch.continueRequest", params)

    async def authorize(self, event: dict[str, Any], login: tuple[str, str] | None, tried: set[str]) -> None:
        """A `Fetch.authRequired`: the proxy's challenge gets --proxy's user and password, once
        a request (a second challenge means they were refused); a server's goes to the page
        as its 401, as it would without interception."""
        rid = event["requestId"]
        answer: dict[str, Any] = {"response": "Default"}
        if (event.get("authChallenge") or {}).get("source") == "Proxy" and login is not None:
            if rid in tried:
                answer = {"response": "CancelAuth"}
            else:
                tried.add(rid)
                answer = {"response": "ProvideCredentials", "username": login[0], "password": login[1]}
        await self.session.send("Fetch.continueWithAuth", {"requestId": rid, "authChallengeResponse": answer})

    async def fail(self, rid: str, reason: str = REFUSED) -> None:
        await self.session.send("Fetch.failRequest", {"requestId": rid, "errorReason": reason})

    async def fulfill(self, rid: str, status: int, headers: Any, body: bytes, phrase: str = "") -> None:
        """Answer it with a body already decoded: no encoding or length of the wire goes with it."""
        params: dict[str, Any] = {"requestId": rid, "responseCode": status,
                                  "responseHeaders": [{"name": n, "value": v} for n, v in served(headers)],
                                  "body": base64.b64encode(body).decode("ascii")}
        if phrase:
            params["responsePhrase"] = phrase
        await self.session.send("Fetch.fulfillRequest", params)

    async def body(self, rid: str, cap: int, length: int | None = None) -> tuple[bytes, bool]:
        """The answer's body (decoded, as Chromium hands it), read as a stream and cut at
        `cap` bytes: (body, cut). `length`: the body's size on the wire when the headers say
        it plainly (no Content-Encoding); a small one is taken whole, in one call. A body
        that cannot be read (the connection dropped mid-body) raises BodyLost; an answer that
        has no body (`bodyless`) is not to be asked."""
        try:
            body, cut = await self._body(rid, cap, length)
        except Exception as exc:  # never an empty body in its place: the Record would call it whole
            raise BodyLost(first_line(exc)) from None
        if not cut and length is not None and len(body) < length:  # Chromium hands what came
            raise BodyLost(f"the connection closed after {len(body)} of {length} bytes")
        return body, cut

    async def _body(self, rid: str, cap: int, length: int | None) -> tuple[bytes, bool]:
        send = self.session.send
        if length is not None and length <= min(cap, WHOLE):
            got = await send("Fetch.getResponseBody", {"requestId": rid})
            raw = got.get("body") or ""
            data = base64.b64decode(raw) if got.get("base64Encoded") else raw.encode("utf-8")
            return data[:cap], len(data) > cap
        stream = (await send("Fetch.takeResponseBodyAsStream", {"requestId": rid}))["stream"]
        parts: list[bytes] = []
        size, cut = 0, False
        try:
            while True:
                got = await send("IO.read", {"handle": stream, "size": CHUNK})
                raw = got.get("data") or ""
                data = base64.b64decode(raw) if got.get("base64Encoded") else raw.encode("utf-8")
                if size + len(data) > cap:
                    parts.append(data[:cap - size])
                    size, cut = cap, True
                    break
                parts.append(data)
                size += len(data)
                if got.get("eof"):
                    break
        finally:
            with contextlib.suppress(Exception):
                await send("IO.close", {"handle": stream})
        return b"".join(parts), cut


def wire_headers(event: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """A `Network.requestWillBeSentExtraInfo`: (network id, the headers as sent). A repeated
    header comes joined by newlines: one pair each; HTTP/2's pseudo-headers (`:authority`)
    are the request line's, not headers."""
    out = []
    for name, value in (event.get("headers") or {}).items():
        if not str(name).startswith(":"):
            out += [(str(name), v) for v in str(value).split("\n")]
    return str(event.get("requestId", "")), out


def served(headers: Any) -> list[tuple[str, str]]:
    """Headers to hand the page with a body already decoded; every Set-Cookie kept."""
    return [(n, v) for n, v in headers if n.lower() not in _DROP]
