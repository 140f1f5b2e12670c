"""`crawltop report` counts each broken thing once, in every format: fragment links into a
broken page are part of that page's finding, and a host that never answered is listed once
with its referring pages. The records come from real crawls of local sites (the DNS names
start with "-": they fail in the resolver of this machine, no query leaves it)."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from aiohttp import web
from support.crawl import crawl
from support.sites import Handler, held, page
from support.wholesite import refused_url

from crawltop.core.reporting.linkcheck import KEEP_PAGES, analyse, load

CLI = [sys.executable, "-m", "crawltop.cli"]
WHOLE = {"requisites": True, "external": True, "fragments": True, "max_tries": 1}
PAGES = 6  # pages with fragment links into the missing page
PER_PAGE = 5  # fragment links on each
LONE = "http://-lone.invalid/only"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=dict(os.environ))


def formats(path: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    return {f: run("report", str(path), "--format", f) for f in ("text", "json", "csv", "markdown", "junit")}


def html(body: str, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=f"<html><body>{body}</body></html>", content_type="text/html")
    return handler


def section(text: str, title: str) -> list[str]:
    """The lines of a text report's section, up to the blank line that ends it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


# -- fragments into a missing page ------------------------------------------------------

async def test_fragment_links_into_a_missing_page_are_its_finding(serve, tmp_path) -> None:
    frags = {i: [f"/gone.html#index-{i * PER_PAGE + j}" for j in range(PER_PAGE)] for i in range(PAGES)}
    routes = {"/": page(*[f"/d{i}" for i in range(PAGES)], "/gone.html", "/fine"),
              "/fine": html('<h2 id="there">here</h2>'),
              "/gone.html": html('<p>not here</p><a href="/">home</a>', status=404),  # parsed: it has no ids
              "/late": page("/gone.html#late-1", "/gone.html#late-2")}
    for i, hrefs in frags.items():
        extra = ("/fine#nope", "/late") if i == 0 else ("/fine#there",) if i == 1 else ()
        routes[f"/d{i}"] = page(*hrefs, *extra)
    site = await serve(routes)
    out = tmp_path / "r.jsonl"
    await crawl(site.url + "/", output=str(out), **WHOLE)
    u = site.url
    gone, total = u + "/gone.html", PAGES * PER_PAGE + 2
    referring = {u + "/"} | {f"{u}/d{i}" for i in range(PAGES)} | {u + "/late"}  # 8 pages refer to it
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    found = [m for r in recs for m in r.get("missing_fragments") or ()]
    assert sum(m[1] == gone for m in found) == total and len(found) == total + 1  # the crawl found each one

    got = formats(out)
    assert {f: p.returncode for f, p in got.items()} == dict.fromkeys(got, 1)
    # text: 8 lines of the missing page (one per referring page) and the one missing id, no more
    text = got["text"].stdout
    # two broken things (the page, the missing id), whatever refers to them
    assert f"2 broken ({len(referring) + 1} links on {len(referring)} pages)" in text.splitlines()[1]
    lines = section(text, "Broken links")
    assert sum(line.split()[-1] == gone for line in lines) == len(referring)
    assert lines.count(f"      and {total} links to fragments in it") == len(referring)
    assert [line.split()[-1] for line in lines if "#fragment" in line] == [u + "/fine#nope"]
    assert "#index-" not in text and "#late-" not in text

    data = json.loads(got["json"].stdout)
    links = [(g["page"], link) for g in data["broken"] for link in g["links"]]
    assert data["broken_count"] == len(links) == len(referring) + 1
    assert {p for p, link in links if link["url"] == gone} == referring
    assert {link["fragment_links"] for _, link in links if link["url"] == gone} == {total}
    assert [(p, link["url"]) for p, link in links if link["tag"] == "#fragment"] == [(u + "/d0", u + "/fine#nope")]
    assert data["fragment_links"] == {gone: total} and data["dead_hosts"] == []

    rows = list(csv.DictReader(io.StringIO(got["csv"].stdout)))
    assert len(rows) == len(referring) + 1
    assert {r["fragment_links"] for r in rows if r["url"] == gone} == {str(total)}
    assert [r["url"] for r in rows if r["tag"] == "#fragment"] == [u + "/fine#nope"]

    md = got["markdown"].stdout
    assert f"**2 broken** ({len(referring) + 1} links on {len(referring)} pages)" in md
    assert md.count(f"| 404, and {total} links to fragments in it | a | {gone} |") == len(referring)
    assert "#index-" not in md

    root = ElementTree.fromstring(got["junit"].stdout)
    cases = root.findall(".//testcase")
    assert root.get("failures") == str(len(cases)) == str(len(referring) + 1)
    assert [c.get("name") for c in cases if "#" in c.get("name", "")] == [u + "/fine#nope"]
    assert all(c.find("failure").get("message").endswith(f", and {total} links to fragments in it")
               for c in cases if c.get("name") == gone)

    # the same records in another order (a --processes crawl interleaves them): the fragment
    # links met before the page's record are folded into its finding all the same
    report = analyse(reversed(list(load(str(out)))))
    assert report.fragment_links == {gone: total}
    assert {b.url for links in report.broken.values() for b in links if b.tag == "#fragment"} == {u + "/fine#nope"}


# -- hosts that never answered --------------------------------------------------------------

async def test_each_host_that_never_answered_is_listed_once(serve, tmp_path) -> None:
    # /slow never answers: the crawl's timeout (1 s) ends it
    ext = await serve({"/ok": page(), "/slow": held()}, "127.0.0.2")  # answers, but /missing and /slow fail
    refused = refused_url("127.0.0.3")
    n = 12  # referring pages: more than KEEP_PAGES
    dns_a = [f"http://-gone-a.invalid/x{k}" for k in range(4)]
    dns_b = [f"http://-gone-b.invalid/z{k}" for k in range(5)]
    conn = [f"{refused}/y{k}" for k in range(3)]
    routes = {"/": page(*[f"/p{i}" for i in range(n)])}
    for i in range(n):  # each URL of a dead host from several pages
        answering = ext.url + ("/missing" if i < 3 else "/slow" if i == 3 else "/ok")
        lone = (LONE,) if i == 0 else ()  # a dead host with one URL: that URL's finding says as much
        routes[f"/p{i}"] = page(dns_a[i % 4], dns_a[(i + 1) % 4], dns_b[i % 5], conn[i % 3], ext.url + "/ok", answering,
                                *lone)
    site = await serve(routes)
    out = tmp_path / "r.jsonl"
    await crawl(site.url + "/", output=str(out), timeout=1.0, host_max_failures=2, **WHOLE)
    recs = {r["url"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert {recs[x]["error_kind"] for x in dns_a + dns_b} <= {"dns", "host-retired"}
    assert "host-retired" in {recs[x]["error_kind"] for x in dns_a + dns_b + conn}  # retired: not its reason
    assert recs[ext.url + "/slow"]["error_kind"] == "timeout" and recs[ext.url + "/slow"]["status"] is None
    pages = [f"{site.url}/p{i}" for i in range(n)]
    refused_host = refused.split("/")[2]
    expected = {"-gone-a.invalid": ("name does not resolve", 4), "-gone-b.invalid": ("name does not resolve", 5),
                refused_host: ("connection refused", 3)}
    # their host answered /ok: a line per URL and page
    answered = {(p, ext.url + "/missing") for p in pages[:3]} | {(pages[3], ext.url + "/slow"), (pages[0], LONE)}

    got = formats(out)
    assert {f: p.returncode for f, p in got.items()} == dict.fromkeys(got, 1)
    text = got["text"].stdout
    assert "3 broken (5 links on 4 pages), 3 hosts never answered (12 URLs)" in text.splitlines()[1]
    broken_urls = {line.split()[-1] for line in section(text, "Broken links") if line.startswith("    ")}
    assert broken_urls == {u for _, u in answered}
    dead = section(text, "Hosts that never answered")
    heads = [line for line in dead if not line.startswith("    ")]
    assert heads == ["  -gone-b.invalid  name does not resolve, 5 URLs",  # most URLs first
                     "  -gone-a.invalid  name does not resolve, 4 URLs",
                     f"  {refused_host}  connection refused, 3 URLs"]
    assert dead.count(f"    and {n - KEEP_PAGES} more") == 3
    assert all(line.strip() in pages for line in dead if line.startswith("    ") and "more" not in line)
    assert "host retired" not in text.split("Slowest")[0]

    data = json.loads(got["json"].stdout)
    hosts = {d["host"]: d for d in data["dead_hosts"]}
    assert {h: (d["reason"], d["urls"]) for h, d in hosts.items()} == expected
    for d in hosts.values():
        assert len(d["pages"]) == KEEP_PAGES and set(d["pages"]) <= set(pages) and d["more_pages"] == n - KEEP_PAGES
        assert d["error_kind"] in ("dns", "connect") and d["kind"] == "external"
    links = {(g["page"], link["url"]) for g in data["broken"] for link in g["links"]}
    assert links == answered and data["broken_count"] == 5
    assert set(data["retired_hosts"]) <= set(hosts) and data["unresolved"] == 0

    rows = list(csv.DictReader(io.StringIO(got["csv"].stdout)))
    host_rows = {r["url"]: r for r in rows if r["tag"] == "host"}
    assert {h: (r["urls"], r["more_pages"]) for h, r in host_rows.items()} == {
        h: (str(c), str(n - KEEP_PAGES)) for h, (_, c) in expected.items()}
    assert all(len(set(r["pages"].split()) & set(pages)) == KEEP_PAGES for r in host_rows.values())
    assert {(r["page"], r["url"]) for r in rows if r["tag"] != "host"} == links

    md = got["markdown"].stdout
    assert "## Hosts that never answered" in md and md.count("| -gone-a.invalid | name does not resolve | 4 |") == 1
    assert ".invalid/" not in md.replace(LONE, "")

    root = ElementTree.fromstring(got["junit"].stdout)
    assert root.get("failures") == str(5 + 3)
    suite = next(s for s in root.findall("testsuite") if s.get("name").startswith("Hosts that never answered"))
    assert sorted(c.get("name") for c in suite.findall("testcase")) == sorted(expected)
    assert [c.get("name") for c in root.findall(".//testcase") if ".invalid/" in c.get("name", "")] == [LONE]


async def _outside(serve, tmp_path, answering: str | None, dead: int = 19) -> Path:
    """A page linking to `dead` hosts whose names do not resolve, 3 URLs each, and to one more
    outside host: answering as a link ("a"), as an image ("img"), or not resolving either (None)."""
    ext = await serve({"/ok": page(), "/ok.png": page()}, "127.0.0.2")
    hosts = [f"http://-h{i}.invalid" for i in range(dead if answering else dead + 1)]
    links = [f"{h}/u{k}" for h in hosts for k in range(3)]
    extra = {"a": f'<a href="{ext.url}/ok">ok</a>', "img": f'<img src="{ext.url}/ok.png">', None: ""}[answering]
    site = await serve({"/": page("/2", *links[::2], extra=extra), "/2": page(*links[1::2])})
    out = tmp_path / "r.jsonl"
    await crawl(site.url + "/", output=str(out), host_max_failures=2, **WHOLE)
    return out


async def test_19_of_20_outside_hosts_not_resolving_are_set_aside_as_offline(serve, tmp_path) -> None:
    """One outside host answers (a link, or a requisite's CDN), 19 names fail: most do, so the
    machine looks offline and their failures are set aside, as when none answers."""
    for answering in ("a", "img"):
        out = await _outside(serve, tmp_path, answering)
        data = json.loads(run("report", str(out), "--format", "json").stdout)
        assert data["unresolved"] == 57, answering
        assert data["dead_hosts"] == [] and data["broken"] == [] and data["broken_count"] == 0
        proc = run("report", str(out))
        assert proc.returncode == 0 and "57 external links and requisites unchecked" in proc.stdout


async def test_a_few_dead_domains_beside_a_live_one_are_link_rot_not_offline(serve, tmp_path) -> None:
    """5 of 6 outside names failing is a small site's rot: listed, and the check fails."""
    out = await _outside(serve, tmp_path, "a", dead=5)
    data = json.loads(run("report", str(out), "--format", "json").stdout)
    assert data["unresolved"] == 0 and len(data["dead_hosts"]) == 5
    assert run("report", str(out)).returncode == 1


async def test_no_outside_host_resolving_sets_them_all_aside(serve, tmp_path) -> None:
    out = await _outside(serve, tmp_path, None)  # offline: their names say nothing of the links
    text = out.read_text()  # a name that does not resolve gives every URL of it that reason, once
    assert '"error_kind":"dns"' in text and "host-retired" not in text
    proc = run("report", str(out))
    assert proc.returncode == 0, proc.stdout
    assert "0 broken (0 links on 0 pages)\n" in proc.stdout
    assert "60 external links and requisites unchecked" in proc.stdout
    data = json.loads(run("report", str(out), "--format", "json").stdout)
    assert (data["unresolved"], data["dead_hosts"], data["broken"], data["more_pages"]) == (60, [], [], {})
