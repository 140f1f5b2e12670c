"""Secrets given through a pipe (`--cookies <(pass show site)`, `--header @<(cmd)`): the
options are read once to check them and again to use them, and a pipe's second read is
empty. The cookie and the header were silently not sent; with --state the header was
replaced by nothing. A real child process reads /dev/fd/N, as bash's process substitution
hands it over."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from aiohttp import web


async def _crawl_with_pipes(site_url: str, *extra: str, state: Path | None = None) -> None:
    cookies_r, cookies_w = os.pipe()
    header_r, header_w = os.pipe()
    os.write(cookies_w, b"127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tpiped-cookie\n")
    os.write(header_w, b"X-Token: piped-header\n")
    os.close(cookies_w)
    os.close(header_w)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", site_url, "--headless", "--quiet", "--no-robots",
            "--no-sitemaps", "--cookies", f"/dev/fd/{cookies_r}", "--header", f"@/dev/fd/{header_r}",
            *(["--state", str(state)] if state else []), *extra,
            pass_fds=(cookies_r, header_r), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    finally:
        os.close(cookies_r)
        os.close(header_r)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err


async def test_piped_cookies_and_headers_are_sent(serve, tmp_path: Path) -> None:
    seen: list[tuple[str | None, str | None]] = []

    async def page(request: web.Request) -> web.Response:
        seen.append((request.cookies.get("sid"), request.headers.get("X-Token")))
        return web.Response(text="<a href='/b'>b</a>", content_type="text/html")

    site = await serve({"/": page, "/b": page})
    await _crawl_with_pipes(site.url + "/")
    assert seen == [("piped-cookie", "piped-header")] * 2
    seen.clear()
    await _crawl_with_pipes(site.url + "/", state=tmp_path / "c.db")  # read a third time with --state
    assert seen == [("piped-cookie", "piped-header")] * 2


async def test_a_fifo_named_by_a_relative_path_is_read_once(serve, tmp_path: Path) -> None:
    """`mkfifo jar; cat cookies.txt > jar & crawltop ... --cookies jar`: checked as `jar`, used
    as its absolute path. A second open of a FIFO whose writer is gone waits forever."""
    import threading

    seen: list[str | None] = []

    async def page(request: web.Request) -> web.Response:
        seen.append(request.cookies.get("sid"))
        return web.Response(text="<p>one</p>", content_type="text/html")

    site = await serve({"/": page})
    os.mkfifo(tmp_path / "jar")

    def writer() -> None:  # one writer, once: as `cat cookies.txt > jar &`
        with open(tmp_path / "jar", "wb") as fh:
            fh.write(b"127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\tfifo-cookie\n")

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--headless", "--quiet", "--no-robots",
        "--no-sitemaps", "--cookies", "jar", cwd=tmp_path, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert seen == ["fifo-cookie"]
