"""Whole pages on a real site: what crawltop's WARC holds against `wget -r -p --warc-file`,
and what requisites, external checks off, and fragment checks cost, side by side.

    .venv/bin/python bench/requisites.py                       # the Python docs (Debian's python3.11-doc)
    .venv/bin/python bench/requisites.py --site DIR --runs 3

The site is served by nginx on 127.0.0.1. Both tools crawl it with robots.txt honoured
(nginx has none) and do not leave its host (the docs link to python.org: external checks
are off, as a machine without a network must run them). For each WARC: the response
records, split into HTML pages and the rest (requisites); the share of wget's requisites
that crawltop's WARC holds, and the reverse. Then crawltop three ways, interleaved:
  whole      requisites and fragments (external off),
  links      --no-requisites --no-fragments: today's crawl of <a> links,
  fragments  --no-requisites: links plus the fragment check,
with CPU per page and peak RSS, so a requisite's and a fragment check's cost read off.
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CRAWLTOP, Nginx, ensure_work, fmt_table, median, run_child  # noqa: E402

DOCS = Path("/usr/share/doc/python3.11/html")
MODES = {"whole": ["--no-external"], "links": ["--no-external", "--no-requisites", "--no-fragments"],
         "fragments": ["--no-external", "--no-requisites"]}


def responses(warc: Path) -> dict[str, str]:
    """WARC-Target-URI -> Content-Type of every response record (warcio)."""
    from warcio.archiveiterator import ArchiveIterator

    out = {}
    with open(warc, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response" and rec.http_headers is not None:
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                out[uri.split("#")[0]] = rec.http_headers.get_header("Content-Type") or ""
    return out


def split(resp: dict[str, str]) -> tuple[set[str], set[str]]:
    html = {u for u, t in resp.items() if t.startswith("text/html")}
    return html, set(resp) - html


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", type=Path, default=DOCS)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    a = ap.parse_args()
    if not a.site.is_dir():
        sys.exit(f"{a.site}: no such directory (apt-get install python3.11-doc)")
    work = ensure_work() / "requisites"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with Nginx("requisites", f"root {a.site}; index index.html;") as ng:
        root = ng.base + "/"
        # 1. the archives, side by side
        ct_warc = work / "crawltop.warc.gz"
        wall, cpu, rss, rc = run_child([str(CRAWLTOP), "crawl", root, "--headless", "-c", str(a.concurrency),
                                        "--no-external", "--warc", str(ct_warc), "-o", str(work / "ct.jsonl")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"crawltop --warc: {wall:.1f} s, cpu {cpu:.1f} s, rss {rss:.0f} MB, rc {rc}")
        wget_dir = work / "wget"
        wall_w, cpu_w, rss_w, rc_w = run_child(
            ["wget", "-r", "-p", "-l", "inf", "-np", "-nv", "-e", "robots=on", "--warc-file", str(work / "wget"),
             "--no-warc-keep-log", "-P", str(wget_dir), root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"wget -r -p --warc-file: {wall_w:.1f} s, cpu {cpu_w:.1f} s, rss {rss_w:.0f} MB, rc {rc_w}")
        ct_warc = sorted(work.glob("crawltop-*.warc.gz"))[0]  # the WARC may rotate into several files: one here
        ct_html, ct_req = split(responses(ct_warc))
        w_html, w_req = split(responses(work / "wget.warc.gz"))
        rows = [["crawltop", str(len(ct_html)), str(len(ct_req)), f"{len(ct_req & w_req) / max(1, len(w_req)):.1%}"],
                ["wget -p", str(len(w_html)), str(len(w_req)), "100.0%"]]
        print(fmt_table(rows, ["WARC of", "HTML pages", "requisites", "of wget's requisites"]))
        only_wget = sorted(w_req - ct_req)
        only_ct = sorted(ct_req - w_req)
        print(f"requisites only wget has: {len(only_wget)} {only_wget[:5]}")
        print(f"requisites only crawltop has: {len(only_ct)} {only_ct[:5]}")
        for p in (ct_warc, work / "wget.warc.gz"):
            with gzip.open(p) as fh:
                size = sum(len(b) for b in iter(lambda: fh.read(1 << 20), b""))
            print(f"{p.name}: {p.stat().st_size / 1e6:.1f} MB on disk, {size / 1e6:.1f} MB of records")
        # 2. what each kind costs, interleaved rounds
        figures: dict[str, list[tuple[float, float, float, int]]] = {m: [] for m in MODES}
        for r in range(a.runs):
            for mode, flags in MODES.items():
                out = work / f"{mode}-{r}.jsonl"
                wall, cpu, rss, rc = run_child([str(CRAWLTOP), "crawl", root, "--headless", "-c", str(a.concurrency),
                                                *flags, "-o", str(out)],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                n = sum(1 for _ in open(out))
                figures[mode].append((wall, cpu, rss, n))
        rows = []
        pages = median([f[3] for f in figures["links"]])
        for mode, fs in figures.items():
            urls = median([f[3] for f in fs])
            cpu = median([f[1] for f in fs])
            rows.append([mode, f"{urls:.0f}", f"{median([f[0] for f in fs]):.1f}", f"{cpu:.2f}",
                         f"{cpu / pages * 1000:.2f}", f"{median([f[2] for f in fs]):.0f}"])
        print(fmt_table(rows, ["crawltop", "records", "wall s", "cpu s", "cpu ms / page", "peak RSS MB"]))
        links, whole, frags = (figures[m] for m in ("links", "whole", "fragments"))
        extra = median([f[3] for f in whole]) - median([f[3] for f in links])
        if extra > 0:
            per = (median([f[1] for f in whole]) - median([f[1] for f in frags])) / extra * 1000
            mem = (median([f[2] for f in whole]) - median([f[2] for f in frags])) * 1024 / extra
            print(f"a requisite costs {per:.2f} ms of CPU and {mem:.1f} kB of peak RSS ({extra:.0f} requisites)")
        frag_ms = (median([f[1] for f in frags]) - median([f[1] for f in links])) / pages * 1000
        frag_mb = median([f[2] for f in frags]) - median([f[2] for f in links])
        print(f"the fragment check costs {frag_ms:.3f} ms of CPU and {frag_mb:.1f} MB of peak RSS "
              f"over {pages:.0f} pages")


if __name__ == "__main__":
    main()
