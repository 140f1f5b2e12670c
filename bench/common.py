"""Shared helpers for the benchmark scripts: paths, nginx, child processes, medians.

Nothing here imports crawltop: the benchmarks drive every crawler, crawltop included,
as a separate child process so that wall time, CPU time and peak RSS are per tool.
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work"
VENV_PY = REPO / ".venv" / "bin" / "python"
# BENCH_CRAWLTOP=/path/to/another/crawltop measures another build (a candidate branch's venv)
CRAWLTOP = Path(os.environ.get("BENCH_CRAWLTOP") or REPO / ".venv" / "bin" / "crawltop")
SCRAPY_VENV = WORK / "scrapy-venv"


def ensure_work() -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    return WORK


def ensure_venv(venv: Path, package: str, program: str) -> Path:
    """`program` of a tool kept in a venv of its own under bench/_work, installed with pip
    on first use (the tools people compare against never share crawltop's venv)."""
    path = venv / "bin" / program
    if not path.exists():
        print(f"creating {venv} and installing {package}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", package], check=True)
    return path


def ensure_scrapy() -> Path:
    """Scrapy in its own venv (bench/_work/scrapy-venv)."""
    return ensure_venv(SCRAPY_VENV, "scrapy", "scrapy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


# --------------------------------------------------------------------------- nginx

def nginx_binary() -> str:
    """Debian's nginx; installed with apt-get when missing (we run as root here)."""
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if path:
        return path
    print("nginx not found: apt-get install -y nginx", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = subprocess.run(["apt-get", "install", "-y", "nginx"], env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", "nginx"], env=env, check=True)
    path = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(path).exists():
        raise RuntimeError("could not install nginx")
    return path


def ensure_apt(package: str, probe: Path) -> None:
    if probe.exists():
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"{probe} missing: apt-get install -y {package}", file=sys.stderr)
    r = subprocess.run(["apt-get", "install", "-y", package], env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", package], env=env, check=True)


class Nginx:
    """A private nginx (own config, pid, logs, temp dirs under bench/_work), run in the
    foreground (`daemon off`) as our child and stopped with SIGQUIT on exit."""

    def __init__(self, name: str, server_block: str, *, port: int | None = None,
                 workers: int = 1, modules: tuple[str, ...] = (), http_extra: str = "",
                 main_extra: str = "") -> None:
        self.port = port or free_port()
        self.dir = ensure_work() / f"nginx-{name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "tmp").mkdir(exist_ok=True)
        self.conf = self.dir / "nginx.conf"
        user = "user root;" if os.geteuid() == 0 else ""
        loads = "\n".join(f"load_module {m};" for m in modules)
        self.conf.write_text(f"""{loads}
{user}
daemon off;
worker_processes {workers};
{main_extra}
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path {self.dir}/tmp/body;
    proxy_temp_path {self.dir}/tmp/proxy;
    fastcgi_temp_path {self.dir}/tmp/fastcgi;
    uwsgi_temp_path {self.dir}/tmp/uwsgi;
    scgi_temp_path {self.dir}/tmp/scgi;
    {http_extra}
    server {{
        listen 127.0.0.1:{self.port};
        server_name localhost;
        {server_block.replace("@PORT@", str(self.port))}
    }}
}}
""")
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Nginx:
        binary = nginx_binary()
        subprocess.run([binary, "-t", "-q", "-c", str(self.conf), "-p", str(self.dir)], check=True)
        self.proc = subprocess.Popen([binary, "-c", str(self.conf), "-p", str(self.dir)])
        try:
            wait_port(self.port)
        except Exception:
            self.__exit__()
            raise
        return self

    def cpu(self) -> float:
        """CPU seconds used so far by this nginx (master and workers)."""
        return proc_tree_cpu(self.proc.pid) if self.proc else 0.0

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------- redis-server

class RedisServer:
    """A private redis-server for one measurement: persistence off (`--save ''
    --appendonly no`: the bench never wants its data back), a Unix socket in its own temp
    dir (no port to collide with another bench), our child until __exit__ stops it.

    Only the harness talks to it (through redis-py, which the main venv has for crawltop);
    nothing here imports crawltop."""

    def __init__(self, parent: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="redis-", dir=parent or ensure_work()))
        self.sock = self.dir / "redis.sock"
        self.url = f"unix://{self.sock}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> RedisServer:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [binary, "--save", "", "--appendonly", "no", "--port", "0", "--unixsocket", str(self.sock),
             "--unixsocketperm", "700", "--dir", str(self.dir), "--daemonize", "no",
             "--loglevel", "warning", "--logfile", str(self.dir / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.client() as r:
                    r.ping()
                return self
            except Exception as err:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"redis-server did not start (see {self.dir}/redis.log)") from err
                time.sleep(0.02)

    def client(self):  # -> redis.Redis (imported here: only the Redis benches need redis-py)
        import redis
        return redis.Redis(unix_socket_path=str(self.sock), socket_timeout=30)

    def used_memory(self) -> int:
        """`INFO memory` used_memory, bytes: what the data costs Redis (allocator view)."""
        with self.client() as r:
            return int(r.info("memory")["used_memory"])

    def cpu(self) -> float:
        """CPU seconds this redis-server has used so far (/proc, so read it before stopping)."""
        return proc_tree_cpu(self.proc.pid) if self.proc else 0.0

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------- children

@dataclass
class RunResult:
    tool: str
    wall: float
    cpu: float          # user + sys seconds of the child (and anything it waited for)
    maxrss_mb: float    # ru_maxrss of the child (largest single process in its tree)
    rc: int
    html_urls: set[str] = field(default_factory=set)
    requests: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return len(self.html_urls)

    @property
    def pages_per_s(self) -> float:
        return ratio(self.pages, self.wall)


def run_child(argv: list[str], *, stdout=None, stderr=None, env: dict | None = None,
              cwd: str | Path | None = None, timeout: float | None = None,
              on_start=None) -> tuple[float, float, float, int]:
    """Run argv; return (wall seconds, cpu seconds, peak RSS MB, return code).

    Uses wait4() on the child's pid, so rusage is that child's own (plus its reaped
    descendants), never the harness's or a sibling tool's. on_start(pid) is called once
    the child runs."""
    global _LAST_BUSY
    busy0, tot0 = machine_cpu()
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env=env, cwd=cwd)
    if on_start is not None:  # e.g. a sampler of /proc/PID (bench/large_pages.py)
        on_start(p.pid)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG if deadline else 0)
        if pid:
            break
        if deadline and time.monotonic() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    busy1, tot1 = machine_cpu()
    _LAST_BUSY = (busy1 - busy0) / max(1e-9, tot1 - tot0) * (os.cpu_count() or 1)
    rc = os.waitstatus_to_exitcode(status)
    p.returncode = rc  # so Popen never tries to reap it again
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, rc


_LAST_BUSY = 0.0


def last_machine_busy() -> float:
    """Busy cores, machine-wide, averaged over the last run_child() (all processes)."""
    return _LAST_BUSY


def wait_quiet(threshold: float = 0.35, max_wait: float = 120.0, window: float = 1.0) -> float:
    """Wait (up to max_wait s) until the machine's other load is below threshold cores.

    This machine is shared: other work on it steals a core from whichever tool runs.
    Returns the busy cores seen in the last window."""
    deadline = time.monotonic() + max_wait
    while True:
        b0, t0 = machine_cpu()
        time.sleep(window)
        b1, t1 = machine_cpu()
        busy = (b1 - b0) / max(1e-9, t1 - t0) * (os.cpu_count() or 1)
        if busy < threshold or time.monotonic() > deadline:
            return busy


def canon(url: str) -> str:
    """Just enough normalisation to compare URL sets across tools: drop the fragment."""
    return urldefrag(url.strip())[0]


def path_of(url: str) -> str:
    s = urlsplit(url)
    return s.path + (("?" + s.query) if s.query else "")


def read_crawltop_jsonl(path: Path) -> tuple[set[str], int, dict]:
    """HTML pages (status 200, text/html) and the record count from crawltop's JSONL."""
    html: set[str] = set()
    n = 0
    statuses: dict[str, int] = {}
    # `--processes N` writes one file per engine: PATH.p1 ... PATH.pN
    parts = [path] if path.exists() and path.stat().st_size else sorted(path.parent.glob(path.name + ".p*"))
    for part in parts:
        with part.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "url" not in rec:
                    continue
                n += 1
                st = rec.get("status")
                key = str(st) if st is not None else ("error" if rec.get("error") else "none")
                statuses[key] = statuses.get(key, 0) + 1
                ct = (rec.get("content_type") or "").lower()
                if st == 200 and ("html" in ct):
                    html.add(canon(rec["url"]))
    return html, n, {"statuses": statuses}


def parse_wget_log(path: Path) -> tuple[set[str], int, dict]:
    """HTML pages and request count from a `wget -r --spider` log (default verbosity).

    Each request starts with a line `--YYYY-MM-DD hh:mm:ss--  URL`; the status line
    (`HTTP request sent, awaiting response... 200 OK`) and `Length: ... [type]` follow.
    In spider mode wget asks HEAD first and then GET for HTML, so a URL can appear twice."""
    html: set[str] = set()
    requests = 0
    statuses: dict[str, int] = {}
    url = None
    status = None
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("--") and "--  " in line:
                url = line.split("--  ", 1)[1].strip()
                status = None
            elif "awaiting response..." in line and url:
                requests += 1
                try:
                    status = int(line.rsplit("...", 1)[1].split()[0])
                except (IndexError, ValueError):
                    status = None
                statuses[str(status)] = statuses.get(str(status), 0) + 1
            elif line.startswith("Length:") and url and status == 200:
                if "[text/html]" in line:
                    html.add(canon(url))
    return html, requests, {"statuses": statuses}


def read_url_list(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {canon(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def crawltop_works() -> bool:
    if not CRAWLTOP.exists():
        return False
    r = subprocess.run([str(CRAWLTOP), "crawl", "--help"], capture_output=True, text=True)
    return r.returncode == 0 and "--headless" in r.stdout


def fmt_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    def line(r: list[str]) -> str:
        return "  ".join(str(x).rjust(w) if i else str(x).ljust(w)
                         for i, (x, w) in enumerate(zip(r, widths, strict=False)))

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


# --------------------------------------------------------------------------- CPU accounting

_TICK = os.sysconf("SC_CLK_TCK")


class InPty:
    """A command in a 120x40 pty, as on a terminal; `cat` drains what it draws (EIO when the
    pty closes). bench/attached.py and bench/dashboard.py run their screens in one."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = dict(os.environ, TERM="xterm-256color")
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.drain = subprocess.Popen(["cat"], stdin=self.master, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)

    def press(self, key: bytes) -> None:
        os.write(self.master, key)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.drain.kill()
        self.drain.wait()
        os.close(self.master)


def proc_tree_cpu(pid: int) -> float:
    """user+sys CPU seconds of pid and its live children (e.g. nginx master + workers)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(x) for x in fh.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def find_descendant(pid: int, comm: str) -> int | None:
    """The first live descendant of pid whose /proc comm is `comm` (e.g. the redis-server
    a `crawltop crawl --processes N` started), or None."""
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            if p != pid and Path(f"/proc/{p}/comm").read_text().strip() == comm:
                return p
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return None


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds summed over all cores since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    total = sum(v[:8])
    return (total - idle) / _TICK, total / _TICK
