"""The formats of `crawltop report`: text (80 columns, sanitised), JSON, CSV, Markdown, JUnit.

Every string that came from a server (URLs, error messages) goes through `clean()` in
the text and Markdown forms, so a hostile page cannot drive the terminal; JSON and CSV
keep the values as recorded (their writers quote them) and JUnit escapes them as XML.

Every format counts a broken thing once (core/reporting/linkcheck.py): a broken page's
finding says how many fragment links point into it, and a host that never answered is one
finding, with its referring pages, instead of a line per URL and page.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from xml.etree import ElementTree as ET

from ..monitor.sanitize import clean
from ..outcomes import outcome_line
from .linkcheck import Broken, Chain, DeadHost, Report

WIDTH = 80


def _fit(text: str, width: int | None) -> str:
    """Sanitised and cut to width, the middle elided (both ends of a URL say the most);
    whole when `width` is None (a pipe or a file: URLs must stay copyable)."""
    s = clean(text, 10_000)
    if width is None or len(s) <= width:
        return s
    keep = width - 1
    return s[: keep // 2] + "…" + s[len(s) - (keep - keep // 2):]


def _page(via: str | None) -> str:
    return via if via is not None else "(no referring page: a root or a sitemap)"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _totals(r: Report) -> str:
    """`N broken (L links on M pages)`, and the hosts that never answered: each broken thing once."""
    line = (f"{r.records:,} records, {r.broken_urls:,} broken ({_plural(r.broken_count, 'link')} on "
            f"{_plural(len(r.broken), 'page')})")
    if r.dead_hosts:
        line += (f", {_plural(len(r.dead_hosts), 'host')} never answered"
                 f" ({_plural(sum(d.urls for d in r.dead_hosts), 'URL')})")
    return line


def _fragments(r: Report, b: Broken) -> str:
    """`and 166 links to fragments in it` for a broken page its fragment links point into, else ''."""
    n = r.fragment_links.get(b.url, 0)
    return f"and {n:,} link{'s' if n != 1 else ''} to fragments in it" if n else ""


def _retired(r: Report) -> list[str]:
    """Retired hosts not listed as hosts that never answered (those say why themselves)."""
    dead = {d.host for d in r.dead_hosts}
    return sorted(h for h in r.retired_hosts if h not in dead)


DEAD_TITLE = "Hosts that never answered (every URL failed before an HTTP status)"


def _steps(c: Chain) -> list[tuple]:
    """(hop, the URL it redirects to) for each hop of a chain."""
    targets = [h.url for h in c.hops[1:]] + [c.final]
    return list(zip(c.hops, targets, strict=False))


def text(r: Report, width: int | None = 80) -> str:
    """The text report; URLs are cut to `width` columns only when writing to a terminal
    (cli/commands/report.py passes None for a pipe or a file)."""
    out: list[str] = []
    w = out.append

    def less(n: int) -> int | None:
        return None if width is None else width - n

    w(_fit(f"crawltop report: {r.source}", width))
    w(_totals(r))
    line = "outcomes: " + outcome_line(r.tally.counts, r.tally.classes)
    if width is not None and len(line) > width:  # two lines on a narrow terminal
        head, _, tail = line.partition("  redirected ")
        line = head + "\n          redirected " + tail
    w(line)
    retired = _retired(r)
    if retired:
        w(_fit(f"{len(retired):,} hosts retired after failures in a row: " + ", ".join(retired), width))
    if r.broken:
        w("")
        w("Broken links, by the page they are on (and what refers: a, img, css url()...)")
        for via, links in r.broken.items():
            w("  " + _fit(_page(via), less(2)))
            for b in links:
                w(f"    {b.reason[:22]:<22} {b.tag[:9]:<9} " + _fit(b.url, less(37)))
                if more := _fragments(r, b):
                    w("      " + more)
    if r.more_pages:
        w("")
        w("More pages refer to these (not listed above)")
        for url, n in sorted(r.more_pages.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"  {n:>+7,}  " + _fit(url, less(11)))
    if r.dead_hosts:
        w("")
        w(DEAD_TITLE)
        for d in r.dead_hosts:
            w("  " + _fit(f"{d.host}  {d.reason}, {_plural(d.urls, 'URL')}", less(2)))
            for page in d.pages:
                w("    " + _fit(page, less(4)))
            if d.more_pages:
                w(f"    and {d.more_pages:,} more")
    if r.unresolved:
        w("")
        w(f"{r.unresolved:,} external links and requisites unchecked: "
          "most external hosts' names did not resolve (offline?)")
    if r.options.broken_only:
        return "\n".join(out) + "\n"
    if r.chains:
        w("")
        w(f"Redirect chains ({len(r.chains):,}; * = merge: the target was already seen)")
        for c in r.chains:
            w("  " + _fit(c.start, less(2)))
            for h, target in _steps(c):
                mark = "*" if h.merged else " "
                if target == c.final:
                    end = f"{c.final_status}" if c.final_status is not None else (c.final_error or "not fetched")
                    target = f"{target}  [{end}]"
                w(f"   {mark}{h.status or '':>3} -> " + _fit(target, less(11)))
    if r.slowest:
        w("")
        w("Slowest pages")
        for ms, url, status in r.slowest:
            w(f"  {ms:>9,.0f} ms  {status or '':>3}  " + _fit(url, less(21)))
    w("")
    w("Totals by status")
    for status, n in sorted(r.by_status.items(), key=lambda kv: str(kv[0])):
        w(f"  {str(status):>6}  {n:>9,}")
    if r.by_error_kind:
        w("Totals by error kind")
        for kind, n in sorted(r.by_error_kind.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"  {clean(kind, 20):<20}  {n:>9,}")
    return "\n".join(out) + "\n"


def as_json(r: Report) -> str:
    d = r.to_dict()
    if r.options.broken_only:
        d = {k: d[k] for k in ("source", "records", "broken_count", "broken", "dead_hosts")}
    return json.dumps(d, ensure_ascii=False, indent=2) + "\n"


CSV_FIELDS = ("page", "url", "status", "error_kind", "error", "discovery", "tag", "kind",
              "fragment_links", "urls", "pages", "more_pages")


def as_csv(r: Report) -> str:
    """One row per broken link (the table a spreadsheet wants), with a header; then one row
    per host that never answered: `url` its host, `tag` "host", `urls` how many of its URLs
    failed, `pages` the pages referring to them (space-separated) and `more_pages` the rest."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(CSV_FIELDS)
    for via, links in r.broken.items():
        for b in links:
            writer.writerow([via or "", b.url, "" if b.status is None else b.status, b.error_kind or "",
                             b.error or "", b.discovery, b.tag, b.kind, r.fragment_links.get(b.url, 0), "", "", ""])
    for d in r.dead_hosts:
        writer.writerow(["", d.host, "", d.error_kind or "", d.error or "", "", "host", d.kind, "", d.urls,
                         " ".join(d.pages), d.more_pages])
    return buf.getvalue()


def _md(text: object) -> str:
    return clean(text, 2000).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def markdown(r: Report) -> str:
    out = [f"# crawltop report: {_md(r.source)}", "",
           _totals(r).replace(f"{r.broken_urls:,} broken", f"**{r.broken_urls:,} broken**", 1) + ".", "",
           "Outcomes: " + outcome_line(r.tally.counts, r.tally.classes), ""]
    retired = _retired(r)
    if retired:
        out += [f"{len(retired):,} hosts retired after failures in a row: " + ", ".join(_md(h) for h in retired), ""]
    w = out.append
    if r.broken:
        w("## Broken links, by the page they are on")
        w("")
        for via, links in r.broken.items():
            w(f"### {_md(_page(via))}")
            w("")
            w("| status / kind | refers as | URL | error |")
            w("|---|---|---|---|")
            for b in links:
                what = ", ".join(x for x in (b.reason, _fragments(r, b)) if x)
                w(f"| {_md(what)} | {_md(b.tag)} | {_md(b.url)} | {_md(b.error or '')} |")
            w("")
        if r.more_pages:
            w("More pages refer to these: " + ", ".join(f"{_md(u)} (+{n:,})" for u, n in sorted(r.more_pages.items())))
            w("")
    if r.dead_hosts:
        w(f"## {DEAD_TITLE}")
        w("")
        w("| host | why | URLs | referring pages |")
        w("|---|---|---:|---|")
        for d in r.dead_hosts:
            pages = ", ".join(_md(p) for p in d.pages) + (f" and {d.more_pages:,} more" if d.more_pages else "")
            w(f"| {_md(d.host)} | {_md(d.reason)} | {d.urls:,} | {pages} |")
        w("")
    if r.options.broken_only:
        return "\n".join(out)
    if r.chains:
        w("## Redirect chains")
        w("")
        w("| start | hops | final | merge |")
        w("|---|---|---|---|")
        for c in r.chains:
            hops = " → ".join(f"{h.status} {_md(t)}" for h, t in _steps(c))
            end = c.final_status if c.final_status is not None else _md(c.final_error or "not fetched")
            w(f"| {_md(c.start)} | {hops} | {_md(c.final)} ({end}) | {'yes' if c.merged else ''} |")
        w("")
    if r.slowest:
        w("## Slowest pages")
        w("")
        w("| ms | status | URL |")
        w("|---:|---:|---|")
        for ms, url, status in r.slowest:
            w(f"| {ms:,.0f} | {status} | {_md(url)} |")
        w("")
    w("## Totals")
    w("")
    w("| status | records |")
    w("|---:|---:|")
    for status, n in sorted(r.by_status.items(), key=lambda kv: str(kv[0])):
        w(f"| {status} | {n:,} |")
    if r.by_error_kind:
        w("")
        w("| error kind | records |")
        w("|---|---:|")
        for kind, n in sorted(r.by_error_kind.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"| {_md(kind)} | {n:,} |")
    w("")
    return "\n".join(out)


def _xml(text: object) -> str:
    """XML 1.0 cannot hold most control characters at all: replace them."""
    return clean(text, 4000)


def _dead_message(d: DeadHost) -> str:
    pages = ", ".join(d.pages) + (f" and {d.more_pages:,} more" if d.more_pages else "")
    return f"{d.reason}: {_plural(d.urls, 'URL')}" + (f", referred to by {pages}" if pages else "")


def junit(r: Report) -> str:
    """One test suite per page with broken links (a failing test case per link), one for the
    hosts that never answered (a failing case per host), or one passing case when nothing is
    broken: a CI job fails when anything is."""
    failures = r.broken_count + len(r.dead_hosts)
    suites = ET.Element("testsuites", name="crawltop", tests=str(max(1, failures)), failures=str(failures))
    if r.ok:
        suite = ET.SubElement(suites, "testsuite", name="crawltop links", tests="1", failures="0")
        ET.SubElement(suite, "testcase", classname="crawltop", name=f"{r.records} records, no broken links")
    for via, links in r.broken.items():
        suite = ET.SubElement(suites, "testsuite", name=_xml(_page(via)), tests=str(len(links)),
                              failures=str(len(links)))
        for b in links:
            case = ET.SubElement(suite, "testcase", classname=_xml(_page(via)), name=_xml(b.url))
            more = _fragments(r, b)
            fail = ET.SubElement(case, "failure", message=_xml(f"{b.reason} ({b.tag}): {b.url}"
                                                               + (f", {more}" if more else "")),
                                 type=_xml(b.error_kind or "http-status"))
            fail.text = _xml(b.error or f"HTTP {b.status}")
    if r.dead_hosts:
        n = str(len(r.dead_hosts))
        suite = ET.SubElement(suites, "testsuite", name=DEAD_TITLE, tests=n, failures=n)
        for d in r.dead_hosts:
            case = ET.SubElement(suite, "testcase", classname="hosts that never answered", name=_xml(d.host))
            fail = ET.SubElement(case, "failure", message=_xml(_dead_message(d)), type=_xml(d.error_kind or "host"))
            fail.text = _xml(d.error or d.reason)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": text, "json": as_json, "csv": as_csv, "markdown": markdown, "junit": junit,
}

