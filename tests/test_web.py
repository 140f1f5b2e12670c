"""`crawltop web`: the monitor served by textual-serve on 127.0.0.1, read in a real
headless Chromium. The page must show the crawl's state and its pages count."""
from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from browser import chromium, open_page
from ctl_helpers import cli, rundir, site, status, wait_gone, wait_status  # noqa: F401

pytestmark = pytest.mark.timeout(180)

if chromium() is None and not os.environ.get("CI"):
    pytest.skip("chromium is not installed (apt-get install chromium; CI installs it and runs this)",
                allow_module_level=True)


def listeners(port: int) -> list[str]:
    """Local addresses (kernel hex) listening on this TCP port, IPv4 and IPv6."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, _, hexport = local.partition(":")
                if state == "0A" and int(hexport, 16) == port:
                    out.append(addr)
    return out


async def serving(web: subprocess.Popen[str], port: int) -> tuple[str, str]:
    """The URL `crawltop web` prints first and its token, once the port accepts."""
    first = web.stdout.readline()  # type: ignore[union-attr]
    m = re.search(r"http://127\.0\.0\.1:\d+/\?token=([\w-]+)", first)
    assert m, first
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return m.group(0), m.group(1)
        except OSError:
            assert time.monotonic() < deadline and web.poll() is None, web.stdout.read()  # type: ignore[union-attr]
            await asyncio.sleep(0.2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_web_monitor_in_headless_chromium(site: str, rundir: Path) -> None:
    rc, out, err = await cli("crawl", site, "--detach", "--name", "webcrawl", "-c", "4", "--no-robots")
    assert rc == 0, err
    pid = (await status("webcrawl"))["pid"]
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "crawltop.cli", "web", "webcrawl", "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, token = await serving(web, port)
        assert listeners(port) == ["0100007F"]  # 127.0.0.1, and nothing else (no 0.0.0.0, no ::)
        # Without the token (or with a wrong one of the same length) nothing is served.
        async with aiohttp.ClientSession() as http:
            for path in ("/", "/ws", "/static/js/textual.js", "/?token=" + "x" * len(token)):
                async with http.get(f"http://127.0.0.1:{port}{path}") as resp:
                    assert resp.status == 403, path

        async with open_page(url) as page:
            text = ""
            deadline = time.monotonic() + 60
            while "RUNNING" not in text:
                assert time.monotonic() < deadline, f"the page never showed the crawl:\n{text}"
                await asyncio.sleep(0.5)
                text = await page.screen()
            assert "pages" in text and "queued" in text
            # Pause from a script: the page shows PAUSED and the exact pages count.
            assert (await cli("ctl", "webcrawl", "pause"))[0] == 0
            s = await wait_status("webcrawl", lambda s: s["busy"] == 0 and s["state"] == "PAUSED", 20)
            want = f"pages {s['pages']:,}"
            deadline = time.monotonic() + 30
            while not ("PAUSED" in text and want in text):
                assert time.monotonic() < deadline, f"wanted PAUSED and {want!r} on the page:\n{text}"
                await asyncio.sleep(0.5)
                text = await page.screen()
            assert re.search(r"PAUSED.*pages [\d,]+", text)
    finally:
        web.terminate()
        web.wait(timeout=15)
    # The browser and the web server are gone; the crawl is not.
    s2 = await status("webcrawl")
    assert s2["state"] == "PAUSED" and s2["pages"] >= s["pages"]
    assert (await cli("ctl", "webcrawl", "stop"))[0] == 0
    await wait_gone(pid)


async def test_web_monitor_of_a_crawl_on_redis(site: str, rundir: Path, redis_url: str) -> None:
    """`web NAME --redis URL`: the whole shared crawl in the browser, processes panel included."""
    rc, out, err = await cli("crawl", site, "--redis", redis_url, "--name", "webshared", "--detach", "-c", "2",
                             "--no-robots", "--no-sitemaps")
    assert rc == 0, err
    bad = subprocess.run([sys.executable, "-m", "crawltop.cli", "web", "nobody", "--redis", redis_url],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "no crawl named 'nobody'" in bad.stderr
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "crawltop.cli", "web", "webshared", "--redis", redis_url,
                            "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, _token = await serving(web, port)
        async with open_page(url) as page:
            text = ""
            deadline = time.monotonic() + 60
            while not ("RUNNING" in text and "Processes 1 live" in text):
                assert time.monotonic() < deadline, f"the page never showed the shared crawl:\n{text}"
                await asyncio.sleep(0.5)
                text = await page.screen()
    finally:
        web.terminate()
        web.wait(timeout=15)
        done = subprocess.run([sys.executable, "-m", "crawltop.cli", "ctl", "webshared", "--redis", redis_url, "stop"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
