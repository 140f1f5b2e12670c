"""One crawl on Redis: one process (memory frontier) vs --processes 1 and 2 on a private
redis-server, side by side in one run, on the ~20,000-page nginx site of bench/compare.py.

    .venv/bin/python bench/redis_scale.py              # 3 interleaved rounds
    .venv/bin/python bench/redis_scale.py --runs 5 -c 20

Each mode is a child process (with --processes: its engines and its redis-server are
its children, so wait4() counts their CPU too). pages/s = records / wall seconds; CPU
ms per record; Redis round trips per record from each engine's exit line (heartbeats
included; target <= 3). Medians, and ratios to the single process.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CRAWLTOP, fmt_table, median, ratio, run_child, wait_quiet  # noqa: E402
from nginx_site import DEFAULT_PORT, generate, serve, site_dir  # noqa: E402

MODES = {"memory": [], "redis-1": ["--processes", "1"], "redis-2": ["--processes", "2"]}
RT = re.compile(r"redis: (\d+) round trips for (\d+) records")
RECORDS = re.compile(r"records (\d+)|: (\d+) records from")


def run_mode(mode: str, root: str, conc: int, work: Path) -> dict:
    state = Path(tempfile.mkdtemp(prefix="rs", dir=work))
    env = dict(os.environ, XDG_STATE_HOME=str(state), CRAWLTOP_RUN_DIR=str(state / "run"))
    argv = [str(CRAWLTOP), "crawl", root, "--headless", "-c", str(conc), "--no-robots", "--no-sitemaps",
            "--name", f"b{os.getpid()}", *MODES[mode]]
    out = state / "out.txt"
    with open(out, "w") as fh:
        wall, cpu, rss, rc = run_child(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    text = out.read_text() + "".join(p.read_text() for p in state.glob("crawltop/log/*.log"))
    records = max(int(a or b) for a, b in RECORDS.findall(text))
    trips = [(int(t), int(n)) for t, n in RT.findall(text)]
    rt = ratio(sum(t for t, _ in trips), sum(n for _, n in trips)) if trips else 0.0
    return {"rc": rc, "wall": wall, "cpu": cpu, "records": records, "rt": rt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = ap.parse_args()
    site = site_dir()
    generate(site, port=args.port)
    work = site.parent
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    with serve(site, args.port):
        root = f"http://127.0.0.1:{args.port}/"
        for n in range(args.runs):
            for mode in MODES:
                wait_quiet()
                r = run_mode(mode, root, args.concurrency, work)
                results[mode].append(r)
                print(f"round {n + 1} {mode:8} rc {r['rc']} {r['records']} records in {r['wall']:.2f}s, "
                      f"cpu {r['cpu']:.2f}s, {r['rt']:.2f} round trips/record", file=sys.stderr)
    rows, base = [], None
    for mode, rs in results.items():
        pps = median([ratio(r["records"], r["wall"]) for r in rs])
        cpu_ms = median([1000 * ratio(r["cpu"], r["records"]) for r in rs])
        base = base or pps
        rows.append([mode, f"{median([r['records'] for r in rs]):.0f}", f"{pps:.0f}", f"{ratio(pps, base):.2f}",
                     f"{cpu_ms:.2f}", f"{median([r['rt'] for r in rs]):.2f}" if mode != "memory" else "-"])
    print(fmt_table(rows, ["mode", "records", "pages/s", "vs memory", "CPU ms/record", "round trips/record"]))


if __name__ == "__main__":
    main()
