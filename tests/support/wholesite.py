"""A site with every kind of reference a page can hold, broken ones among them, and the
hosts around it (whole pages: requisites, link checks): an external host on 127.0.0.2, one that refuses on 127.0.0.3,
one that accepts and drops every connection on 127.0.0.4. Real servers, counted."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from support.sites import Handler, Site

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def body(text: str, ctype: str = "text/html", headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type=ctype, headers=headers)
    return handler


def blob(data: bytes, ctype: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=data, content_type=ctype)
    return handler


class Dropper:
    """Accepts every TCP connection and closes it at once; counts them."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self._server: asyncio.base_events.Server | None = None

    async def start(self, address: str) -> str:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.transport.abort()  # an RST, no response at all

        self._server = await asyncio.start_server(accept, address, 0)
        self.url = f"http://{address}:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def refused_url(address: str = "127.0.0.3") -> str:
    """A URL on a port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind((address, 0))
        port = s.getsockname()[1]
    return f"http://{address}:{port}"


@dataclass
class Hosts:
    site: Site
    ext: Site
    drop: Dropper
    refused: str


def _ext_routes() -> dict[str, Handler]:
    return {
        "/ok.html": body('<html><body><h1 id="here">x</h1><a href="/deeper">deeper</a></body></html>'),
        "/ext.png": blob(PNG, "image/png"),
    }


def _site_routes(ext: str, refused: str, drop: str) -> dict[str, Handler]:
    home = f"""<!DOCTYPE html><html><head><title>Home  page</title>
<link rel="stylesheet" href="/style.css"><link rel="icon" href="/favicon.ico">
<link rel="canonical" href="/"><link rel="alternate" href="/feed.xml">
<style>@import "/imported.css"; .h {{ background: url(/bg-style.png) }}</style>
<script src="/app.js"></script><script src="/missing.js"></script></head>
<body id="top">
<img src="/logo.png" srcset="/small.png 1x, /missing-2x.png 2x">
<picture><source srcset="/pic.webp 480w, /pic-big.webp 800w"><img src="/pic.png"></picture>
<video src="/clip.mp4" poster="/poster.png"><track src="/subs.vtt"></video>
<div style="background-image: url('/bg-attr.png')">x</div>
<img src="{ext}/ext.png"><iframe src="{ext}/ok.html"></iframe>
<a href="/page2">p2</a> <a href="/missing-page">missing</a>
<a href="/page2#present">ok frag</a> <a href="/page2#absent">bad frag</a> <a href="#nowhere">self</a>
<a href="#top">top</a> <a href="#/route">route</a> <a href="#:~:text=x">text</a>
<a href="{ext}/ok.html">ext ok</a> <a href="{ext}/ok.html#nope">ext frag</a> <a href="{ext}/gone">ext 404</a>
<a href="{refused}/x">refused</a> <a href="{drop}/y">dropped</a>
<a href="/nofollow-meta">m</a> <a href="/nofollow-header">h</a> <a href="/refresh">r</a>
<a href="/other" rel="nofollow">nf</a>
</body></html>"""
    return {
        "/": body(home),
        "/style.css": body('@import url("/imported.css");\n/* url(/commented.png) */\n'
                           'body { background: url(bg-css.png) } .x { background: url("/missing-bg.png") }',
                           "text/css"),
        "/imported.css": body(".y { background: url('/font.woff') }", "text/css"),
        "/page2": body('<html><body><p id="present">here</p><a href="/">home</a></body></html>'),
        "/nofollow-meta": body('<html><head><meta name="robots" content="noindex, nofollow"></head>'
                               '<body><a href="/secret-meta">s</a><img src="/nf.png"></body></html>'),
        "/nofollow-header": body('<html><body><a href="/secret-header">s</a></body></html>',
                                 headers={"X-Robots-Tag": "nofollow"}),
        "/refresh": body('<html><head><meta http-equiv="refresh" content="0; url=/refreshed"></head></html>'),
        "/refreshed": body("<html><body>after</body></html>"),
        "/other": body("<html><body>other</body></html>"),
        **{p: blob(PNG, "image/png") for p in ("/logo.png", "/small.png", "/pic.png", "/poster.png", "/bg-attr.png",
                                               "/bg-style.png", "/bg-css.png", "/nf.png", "/favicon.ico")},
        "/pic.webp": blob(b"RIFF", "image/webp"), "/pic-big.webp": blob(b"RIFF", "image/webp"),
        "/clip.mp4": blob(b"\x00\x00\x00\x18ftyp", "video/mp4"), "/subs.vtt": body("WEBVTT\n", "text/vtt"),
        "/app.js": body("console.log(1)", "application/javascript"),
        "/font.woff": blob(b"wOFF", "font/woff"),
    }


@contextlib.asynccontextmanager
async def whole_site() -> AsyncIterator[Hosts]:
    ext = Site(_ext_routes())
    await ext.start("127.0.0.2")
    drop = Dropper()
    await drop.start("127.0.0.4")
    refused = refused_url()
    site = Site({})
    await site.start()
    site.routes.update(_site_routes(ext.url, refused, drop.url))
    try:
        yield Hosts(site, ext, drop, refused)
    finally:
        await site.stop()
        await ext.stop()
        await drop.stop()
