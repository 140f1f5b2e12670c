"""What `--browser` costs and how it compares: crawltop's headless Chromium against Crawlee for
Python's PlaywrightCrawler, on bench/js_site.py (pages only a script builds), offline.

    .venv/bin/python bench/browser.py                       # 60 pages, -c 1 2 4, 3 rounds
    .venv/bin/python bench/browser.py --pages 30 --runs 1 --concurrency 2 --tools crawltop

Rows, side by side in each round (medians over the rounds):
- crawltop --browser and Crawlee at each concurrency: pages per second (pages / wall time of
  the whole command) and peak memory, the PSS of the tool's process and every process under it
  (Chromium's too), sampled every 0.1 s;
- the same site written by the server (/html/K): crawltop with and without --browser, so a
  user knows what the browser costs on a site that does not need it.
Both wait alike before reading a page's links: the network quiet for `--quiet` seconds
(Playwright's own `networkidle` is 0.5 s of no connections), a scroll to the bottom, quiet
again. Crawlee runs in bench/_work/crawlee-venv (made with pip on first use), on the same
Chromium (/usr/lib/chromium/chromium).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CRAWLTOP, WORK, ensure_venv, ensure_work, free_port, wait_port  # noqa: E402

CHROMIUM = "/usr/lib/chromium/chromium"
CRAWLEE_VENV = WORK / "crawlee-venv"


def ensure_crawlee() -> Path:
    return ensure_venv(CRAWLEE_VENV, "crawlee[playwright]", "python")


def tree_pss_kb(root: int) -> int:
    """PSS of `root` and every process under it, in kB (processes that end meanwhile count 0)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except OSError:
            pass
    return total


def measure(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak tree PSS in MB, stdout) of one command run to its end."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})}, cwd=cwd)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_pss_kb(proc.pid))
        time.sleep(0.1)
    wall = time.monotonic() - start
    out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode not in (0, 1):  # crawltop's 1: the crawl found errors, which is not ours here
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}")
    return wall, peak / 1024, out


def crawltop(url: str, c: int, quiet: float, browser: bool, out: Path) -> tuple[float, float, int]:
    cmd = [str(CRAWLTOP), "crawl", url, "--headless", "-q", "-c", str(c), "--no-sitemaps", "--no-robots",
           "-o", str(out)]
    if browser:
        cmd += ["--browser", "--browser-quiet", str(quiet)]
    wall, peak, _ = measure(cmd)
    pages = sum(1 for line in out.read_text().splitlines() if json.loads(line).get("kind") == "page")
    return wall, peak, pages


def crawlee(py: Path, url: str, c: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="crawlee") as store:
        wall, peak, out = measure([str(py), str(Path(__file__).with_name("crawlee_spider.py")), url, str(c), CHROMIUM],
                                  env={"CRAWLEE_STORAGE_DIR": store + "/storage"}, cwd=store)
    pages = int(out.split("pages", 1)[1]) if "pages" in out else 0
    return wall, peak, pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--quiet", type=float, default=0.5, help="network quiet time that makes a page idle (s)")
    ap.add_argument("--tools", default="crawltop,crawlee,plain")
    args = ap.parse_args()
    tools = set(args.tools.split(","))
    py = ensure_crawlee() if "crawlee" in tools else None
    port = free_port()
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("js_site.py")), "--pages", str(args.pages),
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict[str, list[tuple[float, float, int]]] = {}
    try:
        wait_port(port)
        base = f"http://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory(prefix="bench-browser", dir=ensure_work()) as tmp:
            out = Path(tmp) / "records.jsonl"
            for rnd in range(args.runs):
                for c in args.concurrency:
                    if "crawltop" in tools:
                        results.setdefault(f"crawltop --browser -c {c}", []).append(
                            crawltop(f"{base}/p/0", c, args.quiet, True, out))
                    if py is not None:
                        results.setdefault(f"crawlee playwright -c {c}", []).append(crawlee(py, f"{base}/p/0", c))
                if "plain" in tools:
                    c = max(args.concurrency)
                    results.setdefault(f"plain HTML, crawltop -c {c}", []).append(
                        crawltop(f"{base}/html/0", c, args.quiet, False, out))
                    results.setdefault(f"plain HTML, crawltop --browser -c {c}", []).append(
                        crawltop(f"{base}/html/0", c, args.quiet, True, out))
                print(f"round {rnd + 1} of {args.runs} done", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    print(f"{args.pages} pages, quiet {args.quiet} s, medians of {args.runs} rounds")
    print(f"{'':38} {'pages':>6} {'pages/s':>8} {'peak PSS MB':>12}")
    for name, rows in results.items():
        wall = statistics.median(r[0] for r in rows)
        peak = statistics.median(r[1] for r in rows)
        pages = statistics.median(r[2] for r in rows)
        print(f"{name:38} {pages:6.0f} {pages / wall:8.2f} {peak:12.0f}")
    for c in args.concurrency:
        a, b = results.get(f"crawltop --browser -c {c}"), results.get(f"crawlee playwright -c {c}")
        if a and b:
            speed = (statistics.median(r[2] / r[0] for r in a)) / statistics.median(r[2] / r[0] for r in b)
            mem = statistics.median(r[1] for r in a) / statistics.median(r[1] for r in b)
            print(f"-c {c}: crawltop / crawlee  pages/s {speed:.2f}x  peak memory {mem:.2f}x")


if __name__ == "__main__":
    main()
