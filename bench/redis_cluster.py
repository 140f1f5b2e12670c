"""Two engines on one crawl: one redis-server against a Redis Cluster of three masters, side
by side in one run, on bench/politeness.py's 1,000-host loopback site (hosts1000: 1,000
hosts of 50 pages, 5 links a page to other hosts, `--delay 1`, so politeness allows
~1,000 pages/s and the two cores are the bound).

    .venv/bin/python bench/redis_cluster.py                    # 3 interleaved rounds, 60 s a crawl
    .venv/bin/python bench/redis_cluster.py --runs 1 --seconds 20
    .venv/bin/python bench/redis_cluster.py --quick            # 100 hosts, 10 s, 1 round
    .venv/bin/python bench/redis_cluster.py --modes server,cluster,cluster-p1,before \
        --before "env PYTHONPATH=OLD/pkgtree .venv/bin/python -P -m crawltop.cli"

Modes (--modes, default server,cluster): `server`, one redis-server (the crawl in one
partition, P = 1, the default there); `cluster`, three cluster-enabled redis-servers joined
by `redis-cli --cluster create` (no replicas: a replica's copy is the same work on the same
two cores), the crawl in --partitions P (default 64) spread over the three masters;
`cluster-p1`, the same cluster with the crawl in one partition (one hash tag: one master
serves it); `before`, one redis-server and another build, --before CMD (default
$BENCH_CRAWLTOP_BEFORE: a `crawltop` command, its words split as a shell would; give a
PYTHONPATH build `python -P`, or the work tree's crawltop/ in the current directory comes
first). Each run gets a fresh Redis on TCP loopback. The crawl is `crawltop crawl ROOT
--redis URL --headless` and `crawltop join NAME --redis URL --headless`, -c 25 each
(bench/politeness.py's crawltop-p2). Both get SIGINT `--seconds` after nginx saw the first
request.

Columns: pages/s, requests nginx logged in the window / window seconds (a crawl that ended
by itself: over the span from its first request to its last), and between the 10th and the
90th percent of its requests (its start and its tail left out); round trips a
record, from each engine's exit line (cli/engine.py: a pipeline counts once per node it
went to, heartbeats included); Redis commands a record, every command the masters ran (INFO
stats total_commands_processed: the calls inside scripts included, so it is the server's
work, not the network's) over the engines' records, and EVALSHA a record (INFO
commandstats: script calls, the client's own); CPU of the engines and of the Redis
processes, in cores. After each crawl, the crawl's keys on each master (SCAN of
`crawltop:{NAME*`), the partitions each one holds, and its used_memory. Medians over the
rounds; the ratios are cluster / server, cluster-p1 / server and server / before. --tally
runs this tree's engines through bench/script_tally.py and prints the script calls a record,
by script (what the round trips are made of; it costs a little CPU, so not for the rates).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CRAWLTOP, ensure_work, free_port, median, ratio, run_child, wait_quiet  # noqa: E402
from politeness import (  # noqa: E402 (bench/ put on sys.path just above)
    DEFAULT_PORT,
    Stopper,
    generate,
    measure,
    read_hits,
    scenarios,
    serve,
)

CONC = 25
RT = re.compile(r"redis: (\d+) round trips for (\d+) records")


class Redises:
    """`nodes` redis-servers on loopback TCP, a cluster of them when `cluster`; stopped on exit."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster
        self.dir = Path(tempfile.mkdtemp(prefix="rc-", dir=ensure_work()))
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Redises:
        try:
            binary = shutil.which("redis-server") or "/usr/bin/redis-server"
            for _ in range(3 if self.cluster else 1):
                port = free_port()
                while self.cluster and (port > 55535 or not _free(port + 10000)):  # the cluster bus: port + 10000
                    port = free_port()
                d = self.dir / str(port)
                d.mkdir()
                extra = (["--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf")]
                         if self.cluster else [])
                self.procs.append(subprocess.Popen(
                    [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--dir", str(d), "--daemonize", "no", "--loglevel", "warning", "--logfile", str(d / "redis.log"),
                     *extra], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                self.ports.append(port)
            for port in self.ports:
                self._until(lambda port=port: self._client(port).ping())
            if self.cluster:
                subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                               "--cluster-replicas", "0", "--cluster-yes"], capture_output=True, check=True, timeout=60)
                self._until(lambda: all(self._client(p).cluster("info")["cluster_state"] == "ok" for p in self.ports))
        except BaseException:  # a server started before the failure is stopped all the same
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def stats(self) -> dict[str, float]:
        """Commands run, EVALSHA calls and CPU seconds, summed over the nodes."""
        out = {"commands": 0.0, "evalsha": 0.0, "cpu": 0.0}
        for port in self.ports:
            with self._client(port) as r:
                info = r.info("all")
            out["commands"] += info["total_commands_processed"]
            out["evalsha"] += info.get("cmdstat_evalsha", {}).get("calls", 0)
            out["cpu"] += info["used_cpu_sys"] + info["used_cpu_user"]
        return out

    def spread(self, name: str) -> list[dict]:
        """Per node: crawl `name`'s keys (its control keys and every partition's), the
        partitions whose keys it holds, and its used_memory."""
        tag = re.compile(r"crawltop:\{" + re.escape(name) + r":(\d+)\}:")
        rows = []
        for port in self.ports:
            with self._client(port) as r:
                keys, parts = 0, set()
                for key in r.scan_iter(match=f"crawltop:{{{name}*", count=5000):
                    keys += 1
                    m = tag.match(key.decode(errors="replace"))
                    if m:
                        parts.add(int(m.group(1)))
                rows.append({"port": port, "keys": keys, "parts": len(parts),
                             "used_mb": r.info("memory")["used_memory"] / 2**20})
        return rows

    def has(self, name: str) -> bool:
        """Crawl `name` made in Redis (its meta hash, on whichever master holds its slot)."""
        key = f"crawltop:{{{name}}}:meta"
        if not self.cluster:
            with self._client(self.ports[0]) as r:
                return bool(r.exists(key))
        import redis.cluster
        with redis.cluster.RedisCluster(host="127.0.0.1", port=self.ports[0]) as rc:
            return bool(rc.exists(key))

    @staticmethod
    def _client(port: int):  # -> redis.Redis (imported here: only the Redis benches need redis-py)
        import redis
        return redis.Redis(port=port, socket_timeout=10)

    @staticmethod
    def _until(cond) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                if cond():
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise RuntimeError("Redis did not come up")
            time.sleep(0.05)


def _free(port: int) -> bool:
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_mode(sc, mode: str, port: int, log: Path, tag: str, cmd: list[str], parts: int | None,
             tally: bool = False) -> dict:
    """One crawl of two engines on a fresh Redis of `mode` (`cmd`: the crawltop command;
    `parts`: --partitions, None to leave it out; `tally`: cmd is bench/script_tally.py's,
    whose counts come back as `calls`); its figures."""
    logs = ensure_work() / "redis_cluster"
    logs.mkdir(parents=True, exist_ok=True)
    tallies = logs / f"{tag}.tally"
    shutil.rmtree(tallies, ignore_errors=True)
    tallies.mkdir()
    env = {**os.environ, "BENCH_TALLY_DIR": str(tallies)} if tally else None
    with Redises(cluster=mode.startswith("cluster")) as rs:
        before = rs.stats()
        offset = log.stat().st_size
        root = f"http://{sc.roots[0]}:{port}/"
        common = ["--redis", rs.url, "--headless", "-c", str(CONC)]
        split = [] if parts is None else ["--partitions", str(parts)]
        argvs = [[*cmd, "crawl", root, "--name", tag, "--delay", str(sc.delay), "--no-sitemaps",
                  "--no-robots", "--scope", "any", *split, *common],
                 [*cmd, "join", tag, *common]]
        results: list[tuple] = [(), ()]
        stoppers = [Stopper(log, offset, sc.seconds) for _ in argvs]
        outs = [logs / f"{tag}.{i}.log" for i in range(2)]

        def engine(i: int) -> None:
            with open(outs[i], "w") as out:
                results[i] = run_child(argvs[i], stdout=out, stderr=subprocess.STDOUT, on_start=stoppers[i].start,
                                       timeout=sc.seconds + 120, env=env)

        threads = [threading.Thread(target=engine, args=(0,))]
        threads[0].start()
        rs._until(lambda: rs.has(tag))
        threads.append(threading.Thread(target=engine, args=(1,)))
        threads[1].start()
        for t in threads:
            t.join()
        for s in stoppers:
            s.done.set()
        after = rs.stats()
        spread = rs.spread(tag)
    time.sleep(0.3)  # nginx flushes its log buffer every 100 ms
    hits = read_hits(log, offset)
    res = measure(sc, hits, ended_itself=not any(s.signalled for s in stoppers))
    # the middle of the crawl, its start and its tail left out: from the 10th to the 90th
    # percent of its requests
    lo, hi = hits[len(hits) // 10].start if hits else 0.0, hits[len(hits) * 9 // 10].start if hits else 0.0
    res["steady"] = ratio(len(hits) * 9 // 10 - len(hits) // 10, hi - lo)
    res["p90_s"] = hi - hits[0].start if hits else 0.0
    trips = records = 0
    for path in outs:
        for m in RT.finditer(path.read_text(errors="replace")):
            trips, records = trips + int(m.group(1)), records + int(m.group(2))
    wall = max(r[0] for r in results)
    res.update(records=records, round_trips_per_record=ratio(trips, records),
               commands_per_record=ratio(after["commands"] - before["commands"], records),
               evalsha_per_record=ratio(after["evalsha"] - before["evalsha"], records),
               engine_cores=sum(r[1] for r in results) / wall, redis_cores=(after["cpu"] - before["cpu"]) / wall,
               rc=[r[3] for r in results], spread=spread, load=os.getloadavg()[0])
    calls: dict[str, float] = {}
    for f in tallies.glob("*.json"):
        for name, n in json.loads(f.read_text()).items():
            calls[name] = calls.get(name, 0) + n
    shutil.rmtree(tallies, ignore_errors=True)
    if calls:
        res["calls_per_record"] = {k: ratio(v, records) for k, v in sorted(calls.items(), key=lambda kv: -kv[1])}
    return res


KEYS = ("rate", "steady", "p90_s", "round_trips_per_record", "commands_per_record", "evalsha_per_record",
        "engine_cores", "redis_cores")
RATIOS = (("cluster", "server"), ("cluster-p1", "server"), ("server", "before"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=None, help="interleaved rounds (default 3; --quick 1)")
    ap.add_argument("--seconds", type=float, default=None, help="window per crawl (default 60; --quick 10)")
    ap.add_argument("--hosts", type=int, default=None, help="hosts (default 1000; --quick 100)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT + 3)
    ap.add_argument("--modes", default="server,cluster", help="of server,cluster,cluster-p1,before")
    ap.add_argument("--partitions", type=int, default=64, help="the cluster mode's --partitions (default 64)")
    ap.add_argument("--before", default=os.environ.get("BENCH_CRAWLTOP_BEFORE", ""),
                    help="the before mode's crawltop command (default $BENCH_CRAWLTOP_BEFORE)")
    ap.add_argument("--tally", action="store_true",
                    help="run this tree's engines through bench/script_tally.py: script calls a record, by script")
    ap.add_argument("--quiet-wait", type=float, default=30.0, help="wait up to this long for other load to settle")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    known = {"server": None, "cluster": a.partitions, "cluster-p1": 1, "before": None}
    if not modes or any(m not in known for m in modes) or len(set(modes)) != len(modes):
        sys.exit(f"redis_cluster.py: --modes wants some of {','.join(known)}, each once; got {a.modes!r}")
    if "before" in modes and not a.before:
        sys.exit("redis_cluster.py: the before mode wants --before CMD or BENCH_CRAWLTOP_BEFORE")
    head = [sys.executable, str(Path(__file__).with_name("script_tally.py"))] if a.tally else [str(CRAWLTOP)]
    cmds = {m: shlex.split(a.before) if m == "before" else head for m in modes}
    runs = a.runs or (1 if a.quick else 3)
    sc = scenarios(a.quick, a.seconds, a.hosts)["hosts1000"]
    site = generate(sc, a.port)
    log = ensure_work() / "redis_cluster" / "access.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    per: dict[str, list[dict]] = {m: [] for m in modes}
    print(f"{len(sc.hosts)} hosts on port {a.port}, two engines of -c {CONC}, {sc.seconds:.0f} s a crawl, "
          f"{runs} round(s); modes {', '.join(modes)} (cluster: --partitions {a.partitions})", flush=True)
    with serve(sc, site, a.port, log) as ng:
        if ng.proc is None or ng.proc.poll() is not None:
            sys.exit(f"nginx did not start: see {ng.dir}/error.log")
        for r in range(runs):
            order = modes[r % len(modes):] + modes[:r % len(modes)]  # the order rotates each round
            for mode in order:
                wait_quiet(max_wait=a.quiet_wait)
                res = run_mode(sc, mode, a.port, log, f"rc-{mode}-{r}-{os.getpid()}", cmds[mode], known[mode],
                               tally=a.tally and mode != "before")
                per[mode].append(res)
                spread = " · ".join(f"{n['keys']} keys {n['parts']} parts {n['used_mb']:.1f} MB" for n in res["spread"])
                print(f"  round {r + 1} {mode:10s} {res['rate']:7.1f} pages/s (10-90%: {res['steady']:.1f}, "
                      f"90% at {res['p90_s']:.1f} s)  records {res['records']}  "
                      f"round trips/record {res['round_trips_per_record']:.3f}  "
                      f"commands/record {res['commands_per_record']:.1f}  "
                      f"EVALSHA/record {res['evalsha_per_record']:.3f}  engines {res['engine_cores']:.2f} cores  "
                      f"redis {res['redis_cores']:.2f} cores  rc {res['rc']}  load {res['load']:.1f}  "
                      f"per node: {spread}", flush=True)
                if "calls_per_record" in res:
                    print("    a record: " + ", ".join(f"{k} {v:.3f}" for k, v in res["calls_per_record"].items()),
                          flush=True)
    med = {m: {k: median([x[k] for x in rs]) for k in KEYS} for m, rs in per.items()}
    print("\nmedians          pages/s  10-90%  90% at  trips/rec  cmds/rec  evalsha/rec  engines  redis")
    for m, v in med.items():
        print(f"  {m:12s} {v['rate']:9.1f} {v['steady']:7.1f} {v['p90_s']:6.1f}s "
              f"{v['round_trips_per_record']:10.3f} {v['commands_per_record']:9.1f} "
              f"{v['evalsha_per_record']:12.3f} {v['engine_cores']:8.2f} {v['redis_cores']:6.2f}")
    for top, bottom in RATIOS:
        if top in med and bottom in med:
            t, b = med[top], med[bottom]
            print(f"  {top} / {bottom} pages/s: {ratio(t['rate'], b['rate']):.3f} (10-90%: "
                  f"{ratio(t['steady'], b['steady']):.3f}), round trips/record "
                  f"{ratio(t['round_trips_per_record'], b['round_trips_per_record']):.3f}")
    out = ensure_work() / "redis_cluster.json"
    out.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "hosts": len(sc.hosts),
                               "seconds": sc.seconds, "partitions": a.partitions, "before": a.before,
                               "runs": per, "medians": med}, indent=2))
    print(f"figures written to {out}")


if __name__ == "__main__":
    main()
