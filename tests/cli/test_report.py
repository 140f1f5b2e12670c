"""`crawltop report` (the link report from the records) on the demo site's records, in every format, and on bad input.

The demo crawl runs once, through the real CLI (sitemaps on by default); what must be
broken, and which pages may refer to each broken URL, comes from the demo's model."""
from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit
from xml.etree import ElementTree

import pytest
from support.crawl import crawl
from support.sites import page

from crawltop.core.reporting.formats import WIDTH, text
from crawltop.core.reporting.linkcheck import KEEP_PAGES, Options, analyse, load
from crawltop.demo.site import EXPECTED, ext_route, missing_fragments, referrers, route

CLI = [sys.executable, "-m", "crawltop.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=dict(os.environ))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(records file, origin, the second host's origin) of one full demo crawl."""
    out = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    proc = run("demo", "--fast", "--headless", "-o", str(out), "-c", "20", "--timeout", "5")
    assert proc.returncode == 0, proc.stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    origin = urls[0][: urls[0].index("/", 8)]
    ext = next(u for u in urls if u.startswith("http://127.0.0.2"))
    return out, origin, ext[: ext.index("/", 8)]


def model_broken(origin: str, ext: str, min_status: int = 400) -> dict[str, set[str]]:
    """Broken URL (or `page#fragment`) -> every page (or redirect, or sitemap) of the model
    that points to it or loads it."""
    out = {}
    for url, sources in referrers(origin, ext).items():
        parts = urlsplit(url)
        if parts.path.startswith("/private/"):
            continue  # robots-blocked: not broken unless asked
        reply = ext_route(parts.path) if url.startswith(ext) else route(parts.path, dict(parse_qsl(parts.query)),
                                                                         origin, ext)
        if reply.status >= min_status:
            out[url] = sources
    return out | (missing_fragments(origin, ext) if min_status <= 400 else {})


def listed(pairs: set[tuple[str, str]], more: dict[str, int], expected: dict[str, set[str]]) -> None:
    """Every broken thing is listed under pages that really refer to it, KEEP_PAGES at most,
    and with the count of the rest, every page that refers to it is accounted for."""
    by_url: dict[str, set[str]] = {}
    for url, referrer in pairs:
        assert referrer in expected[url], (url, referrer)
        by_url.setdefault(url, set()).add(referrer)
    assert set(by_url) == set(expected)
    for url, pages in by_url.items():
        assert len(pages) == min(KEEP_PAGES, len(expected[url])), url
        assert len(pages) + more.get(url, 0) == len(expected[url]), url


def test_text_report_matches_the_model_and_exits_1(demo) -> None:
    path, origin, ext = demo
    proc = run("report", str(path))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    # a pipe: URLs whole, never cut (a script reads them); a terminal gets WIDTH columns, URLs cut in the middle
    assert "…" not in proc.stdout
    on_terminal = text(analyse(load(str(path))), WIDTH).splitlines()
    assert all(len(line) <= WIDTH for line in on_terminal)
    assert f"{EXPECTED.urls:,} records" in lines[1]
    expected = model_broken(origin, ext)
    assert len(expected) == EXPECTED.not_found + EXPECTED.server_errors + 1  # one missing fragment
    # every broken URL appears, right under pages that really refer to it, with what refers to it
    page_now = None
    found: set[tuple[str, str]] = set()
    tags: dict[str, set[str]] = {}
    for line in lines[next(i for i, x in enumerate(lines) if x.startswith("Broken links, by the page")) + 1:]:
        if not line:
            break
        if line.startswith("      "):
            continue  # "... and N more pages"
        if line.startswith("    "):
            found.add((line.split()[-1], page_now))
            tags.setdefault(line.split()[-1], set()).add(line[27:36].strip())  # the columns of formats.text
        else:
            page_now = line.strip()
    assert {u for u, _ in found} == set(expected)
    for url, via in found:
        assert via in expected[url], (url, via)
    assert tags[origin + "/static/photos/arts@2x.jpg"] == {"srcset"}
    assert tags[origin + "/static/fonts/demo.woff"] == {"css url()"}
    assert tags[ext + "/partner/#no-such-section"] == {"#fragment"}
    assert "Redirect chains (21;" in proc.stdout and "Totals by error kind" in proc.stdout


def test_the_cli_lists_every_format() -> None:
    from crawltop.cli.commands.report import FORMAT_NAMES
    from crawltop.core.reporting.formats import FORMATS

    assert FORMAT_NAMES == tuple(FORMATS)


def test_json_csv_markdown_junit_agree(demo) -> None:
    path, origin, ext = demo
    expected = model_broken(origin, ext)
    j = run("report", str(path), "--format", "json")
    assert j.returncode == 1
    data = json.loads(j.stdout)
    pairs = {(link["url"], group["page"]) for group in data["broken"] for link in group["links"]}
    listed(pairs, data["more_pages"], expected)
    assert data["broken_count"] == len(pairs) and data["records"] == EXPECTED.urls
    kinds = {link["url"]: (link["kind"], link["tag"]) for group in data["broken"] for link in group["links"]}
    assert kinds[ext + "/gone/"] == ("external", "a") and kinds[origin + "/static/fonts/demo.woff"] == (
        "requisite", "css url()")
    assert data["by_status"]["404"] == EXPECTED.not_found and data["by_error_kind"] == {
        "robots": EXPECTED.robots_blocked, "http-status": EXPECTED.server_errors}
    chains = {c["start"]: c for c in data["redirect_chains"]}
    chain = chains[origin + "/chain/1"]
    assert [h["status"] for h in chain["hops"]] == [302, 307, 308] and chain["final"] == origin + "/chain/end"
    assert chain["final_status"] == 200 and not chain["merged"]
    assert chains[origin + "/old/1"]["merged"] and chains[origin + "/old/1"]["final"] == origin + "/about/"
    assert chains[origin + "/loop/a"]["final_error"] == "redirect loop"
    assert sum(c["merged"] for c in data["redirect_chains"]) == EXPECTED.merges  # each merge ends one chain
    assert len(data["slowest"]) == 10

    c = run("report", str(path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert c.returncode == 1 and {(r["url"], r["page"]) for r in rows} == pairs
    assert {r["status"] for r in rows} == {"404", "500", ""}  # "": the missing fragment
    assert {r["error_kind"] for r in rows if r["status"] == "500"} == {"http-status"}
    assert {r["tag"] for r in rows} == {"a", "srcset", "css url()", "#fragment", "sitemap", "redirect"}

    m = run("report", str(path), "--format", "markdown")
    assert m.returncode == 1 and m.stdout.startswith("# crawltop report")
    assert "## Broken links, by the page they are on" in m.stdout and "## Redirect chains" in m.stdout
    assert all(u in m.stdout for u in expected)

    x = run("report", str(path), "--format", "junit")
    assert x.returncode == 1
    root = ElementTree.fromstring(x.stdout)
    cases = root.findall(".//testcase")
    assert int(root.get("failures")) == len(cases) == len(pairs)
    assert {(tc.get("name"), tc.get("classname")) for tc in cases} == pairs
    assert all(tc.find("failure") is not None for tc in cases)


def test_filters(demo) -> None:
    path, origin, ext = demo
    recs = list(load(str(path)))
    base = analyse(recs)
    assert {b.url for links in base.broken.values() for b in links} == set(model_broken(origin, ext))
    robots = analyse(recs, Options(include_robots=True))
    urls = {b.url for links in robots.broken.values() for b in links}
    assert len(urls) == len({b.url for links in base.broken.values() for b in links}) + EXPECTED.robots_blocked
    only_500 = analyse(recs, Options(min_status=500))
    assert {b.url for links in only_500.broken.values() for b in links} == set(model_broken(origin, ext, 500)) | {
        ext + "/partner/#no-such-section"}  # a missing fragment is no status: any --min-status lists it
    proc = run("report", str(path), "--broken-only")
    assert proc.returncode == 1 and "Redirect chains" not in proc.stdout and "Broken links" in proc.stdout
    proc = run("report", str(path), "--min-status", "600", "--format", "junit")
    assert proc.returncode == 1  # the 500s are still http-status errors after their retries


async def test_clean_site_exits_0_and_state_files_work(serve, tmp_path) -> None:
    site = await serve({"/": page("/a", "/b"), "/a": page(), "/b": page("/")})
    out = tmp_path / "r.jsonl"
    await crawl(site.url + "/", output=str(out))
    proc = run("report", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "3 records, 0 broken (0 links on 0 pages)" in proc.stdout
    x = run("report", str(out), "--format", "junit")
    assert x.returncode == 0 and ElementTree.fromstring(x.stdout).get("failures") == "0"

    db = tmp_path / "s.db"
    # in a thread: the site is served by this test's event loop
    state = await asyncio.to_thread(run, "crawl", site.url + "/", "--headless", "--state", str(db), "--no-sitemaps")
    assert state.returncode == 0, state.stderr
    a = json.loads(run("report", str(db), "--format", "json").stdout)
    b = json.loads(run("report", str(out), "--format", "json").stdout)
    assert a["records"] == b["records"] == 3 and a["by_status"] == b["by_status"]


def test_hostile_strings_are_sanitised(tmp_path) -> None:
    evil = "http://x/\x1b[2J\x1b]0;pwned\x07"
    recs = [{"url": evil, "status": 404, "via": "http://x/\x1b[31mred"}, {"url": "http://x/", "status": 200}]
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for fmt in ("text", "markdown"):
        proc = run("report", str(path), "--format", fmt)
        assert proc.returncode == 1 and "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    x = run("report", str(path), "--format", "junit")
    ElementTree.fromstring(x.stdout)  # still well-formed XML


@pytest.mark.parametrize("content", ["missing", "dir", "garbage", "not-records", "binary", "empty-db"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, content: str) -> None:
    path = tmp_path / "in"
    if content == "dir":
        path.mkdir()
    elif content == "garbage":
        path.write_text('{"url": "http://x/", "status": 200}\nthis is not json\n')
    elif content == "not-records":
        path.write_text("[1, 2, 3]\n")
    elif content == "binary":
        path.write_bytes(bytes(range(256)) * 10)
    elif content == "empty-db":
        path.write_bytes(b"SQLite format 3\x00" + b"\0" * 2000)
    proc = run("report", str(path))
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("crawltop: error:") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", [{"status": [404]}, {"status": "404"}, {"discovery": 5}, {"via": ["x"]},
                                 {"elapsed_ms": "slow", "content_type": "text/html", "status": 200},
                                 {"error_kind": {"a": 1}}])
def test_records_with_wrong_field_types_are_bad_input(tmp_path, bad: dict) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"url": "http://x/", "status": 200}) + "\n"
                    + json.dumps({"url": "http://x/y", **bad}) + "\n")
    proc = run("report", str(path))
    assert proc.returncode == 2 and "record 2 is not a crawltop record" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
