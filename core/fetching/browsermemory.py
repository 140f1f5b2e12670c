"""How much memory one Chromium takes: the PSS of its processes, from /proc.

`--browser-memory` restarts the browser (core/fetching/browserlife.py) once its processes
together pass a limit. PSS (proportional set size) counts a page shared by n processes as
1/n in each, so the sum over Chromium's many processes is what they take together; RSS
would count its shared libraries once per process. A browser's processes are the ones whose
command line names its profile directory (each launch has its own) and their descendants.
"""
from __future__ import annotations

import os


def processes(profile: str) -> list[int]:
    """The pids of the Chromium running on `profile`, children (renderers, GPU, zygotes) included."""
    mark = profile.encode()
    parent: dict[int, int] = {}
    roots: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:  # gone meanwhile
            continue
        parent[pid] = int(stat.rsplit(b")", 1)[1].split()[1])
        if mark in cmd:
            roots.add(pid)
    out = set(roots)
    for pid in parent:
        p, hops = parent[pid], 0
        while p > 1 and p not in out and hops < 64:
            p, hops = parent.get(p, 0), hops + 1
        if p in out:
            out.add(pid)
    return sorted(out)


def pss(pids: list[int]) -> int:
    """Bytes: the sum of the processes' PSS (/proc/PID/smaps_rollup); a gone process counts 0."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total
