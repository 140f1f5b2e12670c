"""Summarise a py-spy `--format raw` (collapsed stacks) profile: self and inclusive time.

    .venv/bin/py-spy record -r 250 -f raw -o prof.txt -- .venv/bin/python .venv/bin/crawltop crawl ...
    .venv/bin/python bench/prof_summary.py prof.txt [--top 30] [--filter core/] [--lines]

Inclusive % counts a function once per sample even if it recurses.
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def short(frame: str, lines: bool = False) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    path = m["file"]
    for cut in ("site-packages/", "lib/python3.11/", "/work/main/"):
        if cut in path:
            path = path.split(cut, 1)[1]
            break
    if lines and m["line"]:
        path = f"{path}:{m['line']}"
    return f"{m['func']} ({path})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--filter", default=None, help="only frames whose file contains this")
    ap.add_argument("--lines", action="store_true", help="keep line numbers (self time per line)")
    a = ap.parse_args()
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    with open(a.profile) as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            count = int(n)
            total += count
            frames = [short(f, a.lines) for f in stack.split(";")]
            frames = [f for f in frames if not f.startswith(("process ", "thread "))]
            if not frames:
                continue
            self_c[frames[-1]] += count
            for f in set(frames):
                incl[f] += count
    print(f"{total} samples")
    for title, c in (("self", self_c), ("inclusive", incl)):
        print(f"\n-- top {a.top} by {title} --")
        shown = 0
        for f, n in c.most_common():
            if a.filter and a.filter not in f:
                continue
            print(f"{100 * n / total:6.1f}%  {f}")
            shown += 1
            if shown >= a.top:
                break


if __name__ == "__main__":
    main()
