"""A browser tab's bookkeeping on its own (core/fetching/tabclaims.py, tabroutes.py): no
browser here, the parts that decide what a closing tab keeps and what a request may skip."""
from __future__ import annotations

import asyncio

from multidict import CIMultiDict, CIMultiDictProxy

from crawltop.core.fetching.browserlife import BrowserLife
from crawltop.core.fetching.fetch import Response
from crawltop.core.fetching.tabclaims import TabClaims
from crawltop.core.fetching.tabroutes import foreign
from crawltop.core.fetching.tabshare import Shared
from crawltop.core.parsing.urls import canonical


def test_only_a_url_of_another_scheme_goes_on_unchecked() -> None:
    """A tab's request the crawl cannot read (`canonical` refuses it) goes on unchecked only
    when it is not http(s) (data:, blob:): an http(s) one it cannot check is failed."""
    bad = ["http://[::1/x", "https://exa mple.test:99999/", "HTTP://", "http:/"]
    assert [canonical(u) for u in bad] == [None] * len(bad)
    assert [foreign(u) for u in bad] == [False] * len(bad)
    assert foreign("data:text/plain,hi") and foreign("blob:http://127.0.0.1/x") and foreign("chrome-extension://x/")
    assert not foreign("no scheme at all")


async def test_a_claim_in_flight_when_its_tab_closes_still_lands_in_the_tabs_claims() -> None:
    """The request that asked is cancelled (the tab closing) while its claim is on its way (on
    Redis the URL may already be seen there): the yes is not lost, its bookkeeping runs, and
    the tab's close waits for it (bounded) before the claims are settled."""
    empty: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())
    resp = Response(status=200, reason="OK", headers=empty, body=b"", truncated=False, content_type=None,
                    mime="text/html", charset=None, request_headers=empty)
    tab = TabClaims(BrowserLife(path=None, timeout=5.0, max_bytes=1000, user_agent="t"), Shared(),
                    "http://127.0.0.1:9/", resp)
    answered = asyncio.Event()
    sent = asyncio.Event()

    async def claim() -> bool:  # the crawl's claim, its answer on its way
        sent.set()
        await answered.wait()
        return True

    landed: list[str] = []
    asker = asyncio.ensure_future(tab._claimed(claim(), lambda: landed.append("yes")))
    await sent.wait()
    asker.cancel()
    closing = asyncio.ensure_future(tab.claims_landed(30.0))
    await asyncio.wait((asker,))
    assert asker.cancelled() and landed == [] and not closing.done()
    answered.set()
    await asyncio.wait_for(closing, 30.0)
    assert landed == ["yes"]
