"""A browser tab's answer in the crawl's form: the `Response` its URL's Record is made of.

Apart from the routes that catch it (core/fetching/tabroutes.py) because it is the one place
where what Chromium said becomes what the crawl keeps, as the aiohttp path's `Response`
(core/fetching/fetch.py) plus the one thing a tab's request may differ in: its method (a
script's POST is archived as a POST, its WARC request record too).
"""
from __future__ import annotations

from dataclasses import dataclass

from multidict import CIMultiDict, CIMultiDictProxy

from ..output.provenance import new_hasher, payload_digest
from .fetch import Response, _raw_content_type


@dataclass(slots=True)
class TabResponse(Response):
    """A Response a tab's request got; `method` is what the page sent (core/processing.py
    hands it to the WARC's request record)."""

    method: str = "GET"


def answer(status: int, reason: str, headers: list[tuple[str, str]], sent: list[tuple[str, str]], method: str,
           body: bytes, cut: bool) -> TabResponse:
    """The answer with its body as read (decoded by Chromium, already cut at --max-bytes when
    `cut`): the WARC writer drops the wire's Content-Encoding and Content-Length by its own
    rules (core/output/warc.py); its digest is of these bytes."""
    sha1 = new_hasher()
    sha1.update(body)
    hdrs = CIMultiDictProxy(CIMultiDict(headers))
    raw = hdrs.get("Content-Type")
    mime, _, params = (raw or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return TabResponse(status=status, reason=reason, headers=hdrs, body=body, truncated=cut,
                       content_type=_raw_content_type(raw), mime=mime.strip().lower(), charset=charset,
                       request_headers=CIMultiDictProxy(CIMultiDict(sent)), digest=payload_digest(sha1),
                       method=method)
