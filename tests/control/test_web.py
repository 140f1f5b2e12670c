"""`crawltop web`: the monitor served by textual-serve on 127.0.0.1, read in a real
headless Chromium. The page must show the crawl's state and its pages count."""
from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from support.browser import open_page
from support.ctl import cli, status, wait_gone, wait_status
from support.wait import wait_until, wait_value

pytestmark = [pytest.mark.timeout(180), pytest.mark.chromium]


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

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            assert web.poll() is None, web.stdout.read()  # type: ignore[union-attr]
            return False

    await wait_until(accepts, 30, interval=0.2, what="the web server's port")
    return m.group(0), m.group(1)


async def screen_until(page, cond, timeout: float = 60) -> str:
    """The page's text once `cond` holds on it (read every 0.5 s: a screen is a render)."""
    text = await wait_value(page.screen, cond, timeout, interval=0.5)
    assert isinstance(text, str)
    return text


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
            text = await screen_until(page, lambda t: "RUNNING" in t)
            assert "pages" in text and "queued" in text
            # Pause from a script: the page shows PAUSED and the exact pages count.
            assert (await cli("ctl", "webcrawl", "pause"))[0] == 0
            s = await wait_status("webcrawl", lambda s: s["busy"] == 0 and s["state"] == "PAUSED", 20)
            want = f"pages {s['pages']:,}"
            text = await screen_until(page, lambda t: "PAUSED" in t and want in t, 30)
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
            await screen_until(page, lambda t: "RUNNING" in t and "Processes 1 live" in t)
    finally:
        web.terminate()
        web.wait(timeout=15)
        done = subprocess.run([sys.executable, "-m", "crawltop.cli", "ctl", "webshared", "--redis", redis_url, "stop"],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr


def attach_children(parent: int) -> list[int]:
    """The `crawltop attach` processes whose parent is `parent` (textual-serve execs them)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == parent and stat[0] not in "ZX" and b"attach" in (proc / "cmdline").read_bytes():
                out.append(int(proc.name))
    return out


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


async def gone_within(pids: list[int], seconds: float) -> float:
    t0 = time.monotonic()
    await wait_until(lambda: not any(running(p) for p in pids), seconds, interval=0.05,
                     what=f"the end of attach children {pids}")
    took = time.monotonic() - t0
    assert took < seconds, f"attach children {pids} outlived their purpose by {took:.1f} s"
    return took


async def shown(page, text: str = "pages") -> None:
    await screen_until(page, lambda t: text in t)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
async def test_web_leaves_no_attach_child_behind(site: str, rundir: Path, sig: signal.Signals) -> None:
    """A tab's attach ends when the tab closes, and every attach ends within seconds of `web`,
    whatever ended it (SIGKILL too). The crawl goes on without its monitors.

    A real-time bound: an attach learns of its parent's end from the kernel (PDEATHSIG) or
    its closed pipe and exits in a fraction of a second (the time is printed). 5 s holds on a
    loaded 2-core machine: it is what the exit costs plus the scheduler's delays, not any
    timer of ours, and the escalations a leak would show are longer (or never)."""
    rc, out, err = await cli("crawl", site, "--detach", "--name", "orphans", "-c", "2", "--no-robots")
    assert rc == 0, err
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "crawltop.cli", "web", "orphans", "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, _ = await serving(web, port)
        if sig == signal.SIGKILL:  # once is enough: the tab closes (the browser goes), its attach ends
            async with open_page(url) as page:
                await shown(page)
                first = attach_children(web.pid)
                assert len(first) == 1
            await gone_within(first, 30)
        async with open_page(url) as page:
            await shown(page)
            kids = attach_children(web.pid)
            assert len(kids) == 1
            web.send_signal(sig)
            await asyncio.to_thread(web.wait, 30)
            took = await gone_within(kids, 5.0)
        output = web.stdout.read()  # type: ignore[union-attr]
        assert "Traceback" not in output, output
        print(f"attach gone {took:.2f} s after web's {sig.name}")
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
    s = await wait_status("orphans", lambda s: s["clients"] == 0, 10)
    assert s["state"] == "RUNNING"
    assert (await cli("ctl", "orphans", "stop"))[0] == 0
    await wait_gone(s["pid"])


async def test_web_all_serves_the_dashboard_without_n(site: str, rundir: Path) -> None:
    """The dashboard in a browser: `web --all` serves `crawltop top --no-start`: every crawl, and no `n` unless
    --allow-start (which goes with --all only)."""
    for name in ("webone", "webtwo"):
        rc, out, err = await cli("crawl", site, "--detach", "--name", name, "-c", "2", "--no-robots")
        assert rc == 0, err
    rc, _, err = await cli("web", "--allow-start")
    assert rc == 2 and "--allow-start goes with --all" in err
    rc, _, err = await cli("web", "webone", "--all")
    assert rc == 2 and "give no NAME" in err
    port = free_port()
    web = subprocess.Popen([sys.executable, "-m", "crawltop.cli", "web", "--all", "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, _ = await serving(web, port)
        async with open_page(url) as page:
            # the whole screen, its key bar included (a frame can come before the footer is drawn)
            text = await screen_until(page, lambda t: all(w in t for w in ("webone", "webtwo", "sorted by name",
                                                                             "Open")))
            assert "Stop" in text and "New" not in text  # n is off in a browser
    finally:
        web.terminate()
        web.wait(timeout=15)
    assert (await status("webone"))["state"] == "RUNNING"
    for name in ("webone", "webtwo"):
        assert (await cli("ctl", name, "stop"))[0] == 0
