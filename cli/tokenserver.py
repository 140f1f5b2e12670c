"""The server behind `crawltop web` (cli/commands/web.py): the monitor in a browser, through textual-serve.

textual-serve runs `crawltop attach NAME` per browser tab and relays its screen over a
websocket. It listens on TCP, which every local user can reach, so it is bound to
127.0.0.1 only and guarded like any TCP door to a crawl: a random token, given once in
the URL printed here, then kept in an HttpOnly same-site cookie, and compared in constant
time on every request (the page, its static files, the websocket). From another machine:
`ssh -L 8000:127.0.0.1:8000 HOST crawltop web NAME` and open the printed URL locally.
"""
from __future__ import annotations

import hmac
import os
import secrets
import shlex
import sys
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from textual_serve.server import Server

from .orphan import WEB_PID

COOKIE = "crawltop_token"


class TokenServer(Server):
    """textual-serve's server with a token check in front of every route."""

    def __init__(self, command: str, *, token: str, **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self.token = token

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        token = self.token.encode()

        @web.middleware
        async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
            given = request.query.get("token") or request.cookies.get(COOKIE, "")
            if not hmac.compare_digest(given.encode(), token):
                raise web.HTTPForbidden(text="crawltop web: open the URL printed by `crawltop web`, with its token\n")
            response = await handler(request)
            if "token" in request.query and not response.prepared:
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
            return response

        app.middlewares.append(check)
        return app


def serve_web(name: str, port: int, *, redis: str | None = None, dashboard: bool = False,
              allow_start: bool = False) -> int:
    """Serve `crawltop attach NAME [--redis URL]`, or with `dashboard` `crawltop top`
    (`--no-start` unless `allow_start`); prints the URL with its token first."""
    token = secrets.token_urlsafe(24)
    # `exec`: the shell textual-serve starts becomes the attach, so its parent is us (cli/orphan.py)
    if dashboard:
        args = ["top", *([] if allow_start else ["--no-start"])]
        what, title = "every crawl" + (" (n starts crawls)" if allow_start else ""), "crawltop"
    else:
        args = ["attach", name, *(["--redis", redis] if redis else [])]
        what, title = f"the monitor of {name!r}", f"crawltop {name}"
    command = "exec " + shlex.join([sys.executable, "-m", "crawltop.cli", *args])
    print(f"crawltop web: {what} at http://127.0.0.1:{port}/?token={token}", flush=True)
    os.environ[WEB_PID] = str(os.getpid())  # each attach child dies with us (cli/orphan.py)
    try:
        TokenServer(command, token=token, host="127.0.0.1", port=port, title=title).serve()
    finally:
        sys.unraisablehook = _quiet_at_exit
    return 0


def _quiet_at_exit(unraisable: sys.UnraisableHookArgs) -> None:
    """After Ctrl-C, textual-serve's subprocess transports are collected after its loop
    closed ("Event loop is closed"): noise, not news. Anything else is still shown."""
    if isinstance(unraisable.exc_value, RuntimeError) and "closed" in str(unraisable.exc_value):
        return
    sys.__unraisablehook__(unraisable)
