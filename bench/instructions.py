"""Instructions per page, counted by valgrind: a before/after figure that a busy machine
cannot blur.

    .venv/bin/python bench/instructions.py
    BENCH_CRAWLTOP_BEFORE=/path/to/old/crawltop .venv/bin/python bench/instructions.py
    BENCH_CRAWLTOP_BEFORE=... bench/instructions.py --before-args "--no-requisites --no-external -q"
                                       # an older build that knows these flags: give them

On a shared machine CPU seconds move by 10% from run to run; the number of instructions a
crawl executes moves by well under 1%. Each build crawls a 3,933-page copy of the
compare.py site (4 of its 20 sections: the same pages, links, redirects and dead links),
served by nginx, under `valgrind --tool=callgrind`, once whole and once with --max-pages 1;
the difference divided by the records written is its instructions per record, start-up
left out. A build's two crawls run side by side (one per core), the builds one after the
other. The counts are user-space instructions:
they miss the kernel's share and cache effects, so quote them beside compare.py's CPU
seconds, never instead of them.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nginx_site  # noqa: E402 (bench/ put on sys.path just above)
from common import CRAWLTOP, WORK, ensure_work, fmt_table, ratio  # noqa: E402

PORT = 8767
SECTIONS = 4


def small_site() -> tuple[Path, dict]:
    nginx_site.SECTIONS = SECTIONS  # the generator's key holds it: a change regenerates
    site = WORK / "small-site"
    return site, nginx_site.generate(site, port=PORT)


def count(binary: str, args: list[str], root: str, out: Path) -> tuple[float, int]:
    """(instructions in millions, records written) of one crawl under callgrind."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, "crawl", root,
            "--headless", "-c", "20", "--no-robots", "-o", str(out), *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stderr.splitlines() if "Collected" in ln]
    if not lines:
        sys.exit(f"{binary}: no count from valgrind (exit {done.returncode}): {done.stderr[-400:]}")
    records = 0
    if out.exists():
        with open(out) as fh:
            records = sum(1 for _ in fh)
    return int(lines[-1].split()[-1]) / 1e6, records


def per_record(binary: str, args: list[str], root: str, tag: str) -> dict:
    with ThreadPoolExecutor(2) as pool:
        whole = pool.submit(count, binary, args, root, WORK / f"instr-{tag}.jsonl")
        start = pool.submit(count, binary, [*args, "--max-pages", "1"], root, WORK / f"instr-{tag}-1.jsonl")
        (total, records), (startup, _) = whole.result(), start.result()
    return {"tool": tag, "total": total, "startup": startup, "records": records,
            "per_record": (total - startup) / max(1, records)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--crawltop-args", default="--no-requisites --no-external -q",
                    help="this build's flags (default: requisites and external off, as compare.py's budget)")
    ap.add_argument("--before-args", default="",
                    help="the flags of BENCH_CRAWLTOP_BEFORE (default: none, for an older build, "
                         "which has no requisites, external checks or -q)")
    a = ap.parse_args()
    ensure_work()
    site, manifest = small_site()
    builds = [("crawltop", str(CRAWLTOP), a.crawltop_args.split())]
    if os.environ.get("BENCH_CRAWLTOP_BEFORE"):
        builds.append(("before", os.environ["BENCH_CRAWLTOP_BEFORE"], a.before_args.split()))
    with nginx_site.serve(site, PORT) as ng:
        root = ng.base + "/"
        print(f"site: {len(manifest['html'])} HTML pages, {manifest['links']} links at {root}", flush=True)
        results = [per_record(binary, args, root, tag) for tag, binary, args in builds]
    rows = [[r["tool"], f"{r['per_record']:.3f}", f"{r['startup']:.0f}", f"{r['total']:.0f}", str(r["records"])]
            for r in results]
    print(fmt_table(rows, ["tool", "M instr/record", "start-up M", "whole crawl M", "records"]))
    if len(results) == 2:
        now, before = results[0]["per_record"], results[1]["per_record"]
        print(f"\ncrawltop/before instructions per record: {ratio(now, before):.3f}x")


if __name__ == "__main__":
    main()
