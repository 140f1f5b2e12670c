"""What scheduling by host costs in memory: 1,000,000 hosts with 3 queued URLs each.

Each case runs in its own child process, so its RSS is its own:

- `blind`: what a host-blind queue holds for the same URLs: a deque of the Items and a
  set of their URLs (the memory store's seen set). This is "the URLs themselves".
- `memory`: the memory store (core/queueing/frontier.py MemoryFrontier): per-host queues, the
  ready heap, one `Host` per host, the same seen set.
- `state`: the SQLite store (`--state`): host states and the queue head in memory, the
  rest on disk. Its figure is RSS in all, after every URL was added and committed.

bytes per host = (memory RSS - blind RSS) / hosts: what the scheduler adds per host.

    .venv/bin/python bench/host_memory.py                  # 1,000,000 hosts x 3 URLs
    .venv/bin/python bench/host_memory.py --hosts 100000   # quicker
(bench/frontier_memory.py --modes hosts runs the same.)
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator

TARGET_BYTES_PER_HOST = 400
TARGET_STATE_MB = 200


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _items(hosts: int, per_host: int) -> Iterator[object]:
    from crawltop.core.queueing.frontier import Item
    for k in range(per_host):  # hosts interleaved, as links from many sites arrive
        for i in range(hosts):
            yield Item(f"http://h{i}.example/page/{k}", 10, 1)


async def _child(kind: str, hosts: int, per_host: int) -> dict:
    from crawltop.core import CrawlConfig
    from crawltop.core.queueing.frontier import MemoryFrontier
    from crawltop.core.storage.open_state import open_state
    gc.collect()
    base = _rss_mb()
    started = time.perf_counter()
    keep: object
    if kind == "blind":
        q: deque = deque()
        seen: set[str] = set()
        for item in _items(hosts, per_host):
            seen.add(item.url)  # type: ignore[attr-defined]
            q.append(item)
        keep = (q, seen)
    elif kind == "memory":
        f = MemoryFrontier()
        for item in _items(hosts, per_host):
            f.add(item)  # type: ignore[arg-type]
        assert f.size == hosts * per_host and len(f.hosts.hosts) == hosts
        keep = f
    else:
        path = os.path.join(tempfile.mkdtemp(prefix="crawltop-hostmem-"), "s.db")
        _, store = open_state(path, CrawlConfig(roots=("http://h0.example/",)))
        for n, item in enumerate(_items(hosts, per_host)):
            store.add(item)  # type: ignore[arg-type]
            if n % 20_000 == 0:
                await asyncio.sleep(0)  # the store's flush timer runs on the loop
        await store.aflush()
        assert store.size == hosts * per_host
        keep = store
    seconds = time.perf_counter() - started
    gc.collect()
    rss = _rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del keep
    return {"rss_mb": round(rss, 1), "added_mb": round(rss - base, 1), "peak_mb": round(peak, 1),
            "seconds": round(seconds, 1)}


def run(hosts: int, per_host: int) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for kind in ("blind", "memory", "state"):
        proc = subprocess.run([sys.executable, __file__, "--child", kind, "--hosts", str(hosts),
                               "--per-host", str(per_host)], capture_output=True, text=True, check=True)
        out[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["memory"]["bytes_per_host"] = round((out["memory"]["added_mb"] - out["blind"]["added_mb"]) * 2**20 / hosts)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1_000_000)
    ap.add_argument("--per-host", type=int, default=3)
    ap.add_argument("--child", choices=("blind", "memory", "state"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(_child(a.child, a.hosts, a.per_host))))
        return
    r = run(a.hosts, a.per_host)
    print(f"host memory: {a.hosts:,} hosts x {a.per_host} queued URLs, python {sys.version.split()[0]}")
    for kind, figures in r.items():
        print(f"  {kind:7} " + "  ".join(f"{k}={v:,}" for k, v in figures.items()))
    per_host = r["memory"]["bytes_per_host"]
    print(f"  memory store: {per_host} bytes a host beyond the URLs (target <= {TARGET_BYTES_PER_HOST}): "
          f"{'met' if per_host <= TARGET_BYTES_PER_HOST else 'NOT met'}")
    state = r["state"]["rss_mb"]
    print(f"  --state: {state:.0f} MB RSS in all (target <= {TARGET_STATE_MB} MB at 1M hosts): "
          f"{'met' if state <= TARGET_STATE_MB else 'NOT met'}")


if __name__ == "__main__":
    main()
