"""Start-up time of the commands that do not crawl: each run as a fresh process,
spawn to exit, median of N (default 10), with the 0.15 s target beside it.

    .venv/bin/python bench/startup.py                 # --version, --help, ls, ctl, usage error
    .venv/bin/python bench/startup.py --runs 20 --python /other/venv/bin/python

`ctl NAME status` runs against a real crawl started here (`demo --detach`, stopped at the
end); `ls` lists it. A command's import cost is what this measures: nothing here waits on
the network. Run it with the machine otherwise idle.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.15
ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    args = ap.parse_args()
    cli = [args.python, "-m", "crawltop.cli"]
    run_dir = tempfile.mkdtemp(prefix="ctb")
    env = {**os.environ, "CRAWLTOP_RUN_DIR": os.path.join(run_dir, "run"),
           "XDG_STATE_HOME": os.path.join(run_dir, "state")}
    subprocess.run([*cli, "demo", "--detach", "--name", "bench", "-c", "2"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    commands = {
        "python -c pass": [args.python, "-c", "pass"],
        "crawltop --version": [*cli, "--version"],
        "crawltop --help": [*cli, "--help"],
        "crawltop crawl --help": [*cli, "crawl", "--help"],
        "crawltop ls": [*cli, "ls"],
        "crawltop ctl bench status": [*cli, "ctl", "bench", "status"],
        "crawltop crawl example.com (usage)": [*cli, "crawl", "example.com"],
    }
    try:
        for cmd in commands.values():  # warm the page cache once
            timed(cmd, env)
        results = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved: noise spreads over every command
            for name, cmd in commands.items():
                results[name].append(timed(cmd, env))
    finally:
        subprocess.run([*cli, "ctl", "bench", "stop"], env=env, stdout=subprocess.DEVNULL, check=False)
    print(f"{'command':<36} {'median s':>9} {'min s':>7}  target {TARGET} s   (runs {args.runs})")
    for name, times in results.items():
        med = statistics.median(times)
        mark = "" if name.startswith("python") else ("ok" if med <= TARGET else "SLOW")
        print(f"{name:<36} {med:>9.3f} {min(times):>7.3f}  {mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
