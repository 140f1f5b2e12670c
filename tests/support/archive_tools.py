"""webrecorder's own tools, run for real against our archives: pywb (`wayback`) to replay,
`wacz validate`, `cdxj-indexer`. They live in their own virtualenv, `.venv-archive`
(`make test` builds it; so does the first test that needs it): pywb pins redis 2.10 and
werkzeug, which cannot share crawltop's environment (redis>=5)."""
from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

from support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("CRAWLTOP_ARCHIVE_VENV", ROOT / ".venv-archive"))
PACKAGES = ["pywb>=2.8", "wacz>=0.5", "cdxj-indexer>=1.4"]


def tool(name: str) -> str:
    """The path of a tool of the archive virtualenv, built first if it is missing."""
    path = VENV / "bin" / name
    if path.exists():
        return str(path)
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(str(VENV) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers or two test files: one build
        if not path.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *PACKAGES], check=True)
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Wayback:
    """pywb serving one collection, `crawl`, from our CDXJ and WARC folder (no wb-manager)."""

    def __init__(self, workdir: Path, index: Path, archive_dir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "config.yaml").write_text(
            "collections:\n"
            "  crawl:\n"
            f"    index_paths: {index}\n"
            f"    archive_paths: {archive_dir}/\n"
            "framed_replay: false\n")
        self.port = free_port()
        self.log = open(workdir / "wayback.log", "wb")
        self.proc = subprocess.Popen([tool("wayback"), "-p", str(self.port), "-b", "127.0.0.1"], cwd=workdir,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        def up_or_exited() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return self.proc.poll() is not None

        try:
            wait_for(up_or_exited, 60, interval=0.1)
            if self.proc.poll() is None:
                return
        except AssertionError:
            pass
        self.stop()
        raise AssertionError("pywb did not start: " + (workdir / "wayback.log").read_text())

    def url(self, target: str, ts: str = "") -> str:
        """The raw replay (`id_`: the archived body as it was, no rewriting) of `target`."""
        return f"http://127.0.0.1:{self.port}/crawl/{ts}id_/{target}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
