"""A private redis-server: for `crawl --processes N` without `--redis`, and for the tests.

Persistence is off (the crawl is the data, the server lives as long as the crawl), it
listens only where we say (a Unix socket in a 0700 directory, or a loopback port),
and it dies with us: we stop it at the end, and `--daemonize no` keeps it our child.
"""
from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from ..errors import UsageError

PR_SET_PDEATHSIG = 1
INSTALL_HINT = "install one (Debian/Ubuntu: apt-get install redis-server) or pass --redis URL"


class RedisServer:
    """A redis-server child process. `url` is what redis-py's from_url() takes."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, where: Path, port: int | None = None) -> None:
        self.proc, self.url, self.where, self.port = proc, url, where, port  # where: its socket, or its directory

    @classmethod
    def start(cls, directory: Path, *, port: int | None = None, timeout: float = 10.0,
              persist: bool = False) -> RedisServer:
        """Start one in `directory` (its dir and, without `port`, its Unix socket).
        `persist`: an append-only file fsynced at every write (the tests restart Redis
        mid-crawl and expect it back with its data)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise UsageError(f"no redis-server on PATH: {INSTALL_HINT}")
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if persist else ["--appendonly", "no"]
        args = [binary, "--save", "", *aof, "--dir", str(directory),
                "--daemonize", "no", "--loglevel", "warning", "--logfile", str(directory / "redis.log")]
        if port is None:
            sock = directory / "redis.sock"
            args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            url, where = f"unix://{sock}", sock
        else:
            args += ["--port", str(port), "--bind", "127.0.0.1"]
            url, where = f"redis://127.0.0.1:{port}/0", directory
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)
        server = cls(proc, url, where, port)
        server._wait_ready(timeout)
        return server

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log_dir = self.where.parent if self.port is None else self.where
                raise UsageError(f"redis-server exited at start (see {log_dir}/redis.log)")
            try:
                if self._say(b"PING").startswith(b"+PONG"):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise UsageError(f"redis-server did not answer within {timeout:g}s")

    def stop(self) -> None:
        """SHUTDOWN, then SIGTERM, then SIGKILL. redis-server acts on a SIGTERM only at its
        next tick (hz 10): up to 100 ms of every `--processes` crawl's end, and of each test's
        server; asked with SHUTDOWN it is gone in 1-2 ms (its socket file with it). With
        `--save ""` nothing is snapshotted either way; an append-only file is fsynced."""
        if self.proc.poll() is not None:
            return
        if self._ask_shutdown():
            try:
                self.proc.wait(1)
                return
            except subprocess.TimeoutExpired:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _ask_shutdown(self) -> bool:
        """SHUTDOWN on a connection of its own, which the server closes as it goes; False if
        it could not be asked (then the signals do it)."""
        try:
            return self._say(b"SHUTDOWN") == b""  # closed: gone, or going (an error reply, e.g. NOAUTH: not)
        except OSError:
            return False

    def _say(self, command: bytes) -> bytes:
        """One inline command on a fresh connection (its Unix socket, or its port) and the
        first bytes of the answer: b"" when the server closed the connection."""
        where = str(self.where) if self.port is None else ("127.0.0.1", self.port)
        with socket.socket(socket.AF_UNIX if self.port is None else socket.AF_INET) as s:
            s.settimeout(1.0)
            s.connect(where)
            s.sendall(command + b"\r\n")
            return s.recv(64)

    def kill(self) -> None:
        """As a crash would: the tests take Redis away mid-crawl with this."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def die_with_parent() -> None:
    """In a child, before exec: SIGTERM when our parent dies, even by SIGKILL (Linux), so
    a killed `--processes` leaves neither engines nor its redis-server behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup still runs
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
