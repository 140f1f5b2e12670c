"""The crawltop command as a user runs it: exit codes, the report, Ctrl-C."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.wait import wait_for

from crawltop.demo.site import EXPECTED

CLI = [sys.executable, "-m", "crawltop.cli"]
ENV = dict(os.environ)


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


@pytest.mark.parametrize("argv", [
    ["crawl", "ftp://example.com/"],
    ["crawl", "not a url"],
    ["crawl", "http://"],
    ["crawl", "http://x/", "--scope", "planet"],
    ["crawl", "http://x/", "-c", "0"],
    ["crawl", "http://x/", "--timeout", "nan"],  # (nan > 0 is False, and so is nan <= 0)
    ["crawl", "http://x/", "--max-time", "inf"],
    ["crawl", "http://x/", "--processes", "129"],  # a typo is not a fork bomb
    ["crawl", "http://x/", "--max-depth", "-1"],  # crawled as if 0 were meant, silently
    ["crawl", "http://x/", "--max-redirect", "-1"],
    ["report", "r.jsonl", "--min-status", "99"],  # (600 and more: no status is broken, only errors)
    ["web", "x", "--port", "70000"],
    # hostile local input: files that never end, bytes that are not text, values that end a header
    ["crawl", "http://x/", "--header", "@/dev/zero"],
    ["crawl", "http://x/", "--cookies", "/dev/zero"],
    ["report", "/dev/zero"],
    ["crawl", "http://x/", "--user-agent", "ua\r\nX-Injected: 1"],
    ["crawl", "http://x/", "--header-host", "a b"],
    ["crawl", "http://x/", "--header-host", "https://a/"],
    # a setting of the WARC files without --warc wrote no archive and said nothing
    ["crawl", "http://x/", "--wacz", "site.wacz"],
    ["crawl", "http://x/", "--dedup-from", "old.cdxj"],
    ["crawl", "http://x/", "--exclude", "(unclosed"],
    ["crawl"],
    ["bogus"],
])
def test_usage_errors_exit_2_with_one_line(argv: list[str]) -> None:
    proc = run(*argv, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("crawltop: error:") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("root", "meant"), [
    ("example.com", "https://example.com/"),
    ("example.com/a/b?x=1", "https://example.com/a/b?x=1"),
    ("localhost:8080", "https://localhost:8080/"),
])
def test_a_bare_host_suggests_the_url(root: str, meant: str) -> None:
    proc = run("crawl", root)
    assert proc.returncode == 2
    assert proc.stderr == f"crawltop: error: not an http(s) URL with a host: {root} (did you mean {meant} ?)\n"


def test_non_crawling_commands_import_no_engine() -> None:
    """--version, ls, ctl and the parser import neither aiohttp nor the crawler (so they
    start at once; bench/startup.py measures it)."""
    code = ("import sys; from crawltop.cli.main import build_parser; build_parser(); "
            "import crawltop.cli.commands.ctl, crawltop.cli.commands.ls, crawltop.cli.commands.top; "
            "print(sorted(m for m in ('aiohttp', 'crawltop.core.crawler', 'textual', 'redis', 'asyncio') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_crawltop_alone_is_the_dashboard_and_needs_a_terminal() -> None:
    """`crawltop` with no command opens the dashboard; from a script (no terminal)
    it says so in one line, exit 2, rather than draw a screen into a pipe."""
    proc = run()
    assert proc.returncode == 2
    assert proc.stderr == ("crawltop: the dashboard needs a terminal; `crawltop ls` lists the crawls as text "
                           "(crawltop --help: every command)\n")
    assert "with no command, every crawl" in run("--help").stdout


def test_demo_headless_report_and_records(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    proc = run("demo", "--fast", "--headless", "-o", str(out), "-c", "20", "--timeout", "5")
    assert proc.returncode == 0, proc.stderr
    assert "crawltop report" in proc.stdout and "merges 19" in proc.stdout
    assert "   500  2" in proc.stdout
    # one vocabulary (core/outcomes.py): robots-blocked URLs are skipped, a 404 a status, errors the failed
    assert "errors: 2" in proc.stdout and "http-status: HTTP 500 after" in proc.stdout
    assert "cancelled 0" in proc.stdout and f"4xx {EXPECTED.not_found}" in proc.stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == EXPECTED.urls  # the demo's model, sitemaps included
    assert set(records[0]) >= {"url", "status", "next_url", "merged", "error", "content_type", "encoding",
                               "size", "num_urls", "num_new_urls", "depth", "tries", "elapsed_ms"}


def test_ctrl_c_stops_cleanly_with_report_and_records(tmp_path: Path) -> None:
    out = tmp_path / "slow.jsonl"
    proc = subprocess.Popen([*CLI, "demo", "--headless", "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    wait_for(lambda: out.exists() and out.stat().st_size >= 2000, interval=0.1, what="2,000 bytes of records")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "crawltop report" in stdout
    records = [json.loads(line) for line in out.read_text().splitlines()]
    urls = [r["url"] for r in records]
    assert len(urls) == len(set(urls)) > 10
    assert any((r["error"] or "").startswith("Cancelled") for r in records)


def test_escape_sequences_never_reach_the_terminal() -> None:
    from crawltop.core.monitor.sanitize import clean

    assert clean("http://x/\x1b[2J\x1b]0;pwned\x07\u202e") == "http://x/?[2J?]0;pwned??"


def test_a_header_file_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    headers = tmp_path / "headers"
    headers.write_bytes(b"X-Ok: 1\n\xff\xfe\n")
    proc = run("crawl", "http://x/", "--header", f"@{headers}")
    assert (proc.returncode, proc.stderr) == (2, f"crawltop: error: --header {headers}: not UTF-8 text (byte 8)\n")


def test_wacz_without_warc_makes_no_state_file(tmp_path: Path) -> None:
    state = tmp_path / "c.db"
    proc = run("crawl", "http://x/", "--state", str(state), "--wacz", str(tmp_path / "c.wacz"))
    assert proc.returncode == 2 and "--wacz needs --warc" in proc.stderr
    assert not state.exists()  # refused before the crawl began: nothing to resume


@pytest.mark.parametrize(("argv", "message"), [
    (["export", "{db}", "--jsonl", "{db}"], "--jsonl {db} is also the state file"),
    (["export", "{db}", "--csv", "{link}"], "--csv {link} is also the state file"),  # a symlink to it
    (["export", "{db}", "--jsonl", "{tmp}/a", "--csv", "{tmp}/a"], "--csv {tmp}/a is also the file of --jsonl"),
    (["resume", "{db}", "-o", "{db}"], "-o {db} is also the state file"),
    (["report", "{jsonl}", "-o", "{jsonl}"], "-o {jsonl} is also the records read"),
    (["crawl", "http://x/", "--state", "{db}", "-o", "{db}"], "-o {db} is also the state file"),
    (["crawl", "http://x/", "--cookies", "{jsonl}", "-o", "{jsonl}"], "-o {jsonl} is also the file of --cookies"),
])
def test_an_output_that_is_an_input_is_refused_and_both_are_kept(tmp_path: Path, argv: list[str],
                                                                 message: str) -> None:
    """Each of these lost a crawl: the state truncated, the records replaced by their report,
    SQLite pages overwritten with JSON lines (cli/clobber.py)."""
    db, jsonl, link = tmp_path / "c.db", tmp_path / "r.jsonl", tmp_path / "link.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    jsonl.write_text('{"url": "http://x/", "status": 200}\n')
    link.symlink_to(db)
    names = {"db": db, "jsonl": jsonl, "link": link, "tmp": tmp_path}
    before = (db.read_bytes(), jsonl.read_text())
    proc = run(*(a.format(**names) for a in argv))
    expected = f"crawltop: error: {message.format(**names)}: it would be overwritten\n"
    assert (proc.returncode, proc.stderr) == (2, expected)
    assert (db.read_bytes(), jsonl.read_text()) == before and not (tmp_path / "a").exists()


def test_a_cookie_jar_may_be_read_and_saved_in_place(tmp_path: Path) -> None:
    """`--cookies F --save-cookies F` is meant (curl's -b F -c F): not refused."""
    jar = tmp_path / "jar.txt"
    jar.write_text("# Netscape HTTP Cookie File\n")
    proc = run("crawl", "http://127.0.0.1:9/", "--headless", "--quiet", "--max-tries", "1", "--no-robots",
               "--cookies", str(jar), "--save-cookies", str(jar))
    assert proc.returncode == 4, proc.stderr  # no root answered: the crawl ran, nothing was refused


def test_stdout_redirected_onto_an_input_is_refused(tmp_path: Path) -> None:
    """`crawltop report r.jsonl >> r.jsonl`: stdout is a file like any output."""
    records = tmp_path / "r.jsonl"
    records.write_text('{"url": "http://x/", "status": 200}\n')
    with open(records, "a") as out:
        proc = subprocess.run([*CLI, "report", str(records)], stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=60, env=ENV)
    assert (proc.returncode, proc.stderr) == (
        2, "crawltop: error: standard output is also the records read: it would be overwritten\n")
    assert records.read_text() == '{"url": "http://x/", "status": 200}\n'


def test_an_output_named_dev_stdout_is_not_a_clash(tmp_path: Path) -> None:
    """`report r.jsonl -o /dev/stdout > f`: stdout is then the output itself, not another file."""
    records = tmp_path / "r.jsonl"
    records.write_text('{"url": "http://x/", "status": 200}\n')
    with open(tmp_path / "f.txt", "w") as out:
        proc = subprocess.run([*CLI, "report", str(records), "-o", "/dev/stdout"], stdout=out,
                              stderr=subprocess.PIPE, text=True, timeout=60, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "Totals by status" in (tmp_path / "f.txt").read_text()

