"""Exit codes a script can use (cli/exitcodes.py, the README's table, `crawl --help`).

0 when the crawl ran (to its end, stopped, --max-time), whatever the pages said; 4 when no
root could be fetched at all, with the reason in words on stderr; 2 for usage.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from aiohttp import web
from support.ctl import cli
from support.sites import page, slow

from crawltop.cli.exitcodes import EXIT_CODES


async def test_refused_root_exits_4_with_the_reason() -> None:
    rc, out, err = await cli("crawl", "http://127.0.0.1:9/", "--headless", "--quiet", "--max-tries", "1")
    assert rc == 4, (out, err)
    assert err.strip() == "crawltop: no root could be fetched: http://127.0.0.1:9/: connection refused"
    assert "status codes: none (no server answered)" in out and "connect: connection refused" in out


async def test_unresolvable_root_exits_4_with_the_reason() -> None:
    # A label may not begin with a hyphen (RFC 1123), so the C library's resolver refuses
    # the name itself ("Name or service not known") without asking any DNS server: the test
    # stays on this machine. (`nonexistent.invalid` would send a query to resolv.conf's server.)
    rc, out, err = await cli("crawl", "http://-x.invalid/", "--headless", "--quiet", "--max-tries", "1")
    assert rc == 4, (out, err)
    assert err.strip() == "crawltop: no root could be fetched: http://-x.invalid/: name does not resolve"
    assert "status codes: none (no server answered)" in out and "dns: name does not resolve" in out


async def test_one_refused_root_of_two_is_not_a_failure(serve) -> None:
    site = await serve({"/": page()})
    rc, out, err = await cli("crawl", site.url + "/", "http://127.0.0.1:9/", "--headless", "--quiet",
                             "--max-tries", "1")
    assert rc == 0, err
    assert "errors: 1" in out


async def test_pages_that_answer_404_exit_0(serve) -> None:
    async def gone(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404)

    site = await serve({"/": gone})
    rc, out, err = await cli("crawl", site.url + "/", "--headless", "--quiet", "--no-sitemaps")
    assert rc == 0, err
    assert "4xx 1" in out and "errors: 0" in out and err == ""  # --quiet: no progress lines


async def test_max_time_stops_cleanly_and_exits_0(serve, tmp_path) -> None:
    site = await serve({"/": page(*[f"/p{i}" for i in range(200)])} | {f"/p{i}": _leaf(0.5) for i in range(200)})
    started = time.monotonic()
    rc, out, err = await cli("crawl", site.url + "/", "--headless", "--quiet", "-c", "2", "--no-robots",
                             "--max-time", "1.5", timeout=60)
    took = time.monotonic() - started
    assert rc == 0, err
    assert took < 20, took  # a margin for a loaded machine; it stops at 1.5 s
    line = next(ln for ln in out.splitlines() if "outcomes:" in ln)
    cancelled = int(line.split("cancelled ")[1].split()[0].replace(",", ""))
    assert cancelled > 100 and "errors: 0" in out  # the queue was cancelled, not failed


def test_help_shows_the_exit_codes() -> None:
    proc = subprocess.run([sys.executable, "-m", "crawltop.cli", "crawl", "--help"], capture_output=True, text=True)
    assert EXIT_CODES.strip() in proc.stdout
    for option in ("--max-time", "--quiet"):
        assert option in proc.stdout


def _leaf(delay: float):
    return slow(delay)


async def test_max_time_with_state_keeps_the_queue_to_resume(serve, tmp_path) -> None:
    site = await serve({"/": page(*[f"/p{i}" for i in range(100)])} | {f"/p{i}": _leaf(0.3) for i in range(100)})
    state = str(tmp_path / "c.db")
    rc, out, err = await cli("crawl", site.url + "/", "--state", state, "--headless", "--quiet", "-c", "2",
                             "--no-robots", "--max-time", "1.5", timeout=60)
    assert rc == 0, err
    assert "cancelled 0" in out  # kept in the state file, not cancelled
    first = sum(site.hits.values())
    rc, out, err = await cli("resume", state, "--headless", "--quiet", "--max-time", "1.5", timeout=60)
    assert rc == 0, err
    assert "URLs queued" in err and sum(site.hits.values()) > first  # it went on from there


async def test_a_reader_that_left_is_not_an_error(serve, tmp_path) -> None:
    """`crawltop crawl URL | head -1`: the reader closes the pipe before the report is
    written. The command still ends as it should (cli/stdout.py): its state is marked
    finished, its WACZ packed, its records whole; no message, and 141 (128 + SIGPIPE), the
    code of any writer whose reader left. Buffered stdout (the usual case) and unbuffered
    (PYTHONUNBUFFERED) fail at different writes: both are run. A failing output that is not
    stdout is still an error (exit 2)."""
    site = await serve({"/": page("/a", "/b"), "/a": page(), "/b": page()})
    for unbuffered in (False, True):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        run = tmp_path / f"u{int(unbuffered)}"
        run.mkdir()
        records, state = run / "r.jsonl", run / "c.db"
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader left before the first line
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--headless", "--no-robots",
                "-o", str(records), "--state", str(state), "--warc", str(run / "a.warc.gz"),
                "--wacz", str(run / "a.wacz"), stdin=asyncio.subprocess.DEVNULL, stdout=write_end,
                stderr=write_end, env=env)  # progress lines on stderr: their reader left too
        finally:
            os.close(write_end)
        await asyncio.wait_for(proc.wait(), 60)
        assert proc.returncode == 141, unbuffered
        assert len(records.read_text().splitlines()) == 3  # /, /a, /b: the crawl ran to its end
        assert (run / "a.wacz").stat().st_size > 0  # packed after the report
        rc, _, err_text = await cli("resume", str(state), "--headless")
        assert rc == 0 and "already finished (3 records)" in err_text  # its state says so

    rc, _, err_text = await cli("crawl", site.url + "/", "--headless", "--quiet", "-o", "/dev/full")
    assert rc == 2 and err_text.startswith("crawltop: error:"), err_text


async def test_a_code_of_its_own_goes_before_141() -> None:
    """No root answered (4) and the reader left: 4, the code that says more."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", "http://127.0.0.1:9/", "--headless", "--max-tries", "1",
            stdin=asyncio.subprocess.DEVNULL, stdout=write_end, stderr=asyncio.subprocess.PIPE)
    finally:
        os.close(write_end)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 4 and b"no root could be fetched" in err



def test_browser_mode_refuses_what_it_cannot_do_yet_in_one_line() -> None:
    """--browser with --dns-server (Chromium looks names up itself): exit 2, one line, nothing
    started. Across processes it runs (tests/cluster/test_cluster_browser.py), so an
    unreachable --redis is what the one line says then."""
    for extra, said in ((["--dns-server", "127.0.0.1:53"], "--browser"),
                        (["--redis", "redis://127.0.0.1:1"], "cannot reach Redis")):
        proc = subprocess.run([sys.executable, "-m", "crawltop.cli", "crawl", "http://127.0.0.1:9/", "--browser",
                               *extra], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (extra, proc.stderr)
        assert said in proc.stderr, proc.stderr
