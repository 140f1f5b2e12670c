"""What a paused crawl costs at rest: the detached engine, an attached monitor, a same-loop TUI.

    .venv/bin/python bench/idle_cpu.py [--seconds 10] [--rounds 3]

Each round: `crawltop demo --detach`, paused with `ctl`, its CPU read from /proc over
--seconds; then `crawltop attach` in a 120x40 pty (drained by a thread here, as a
terminal would), the monitor's CPU and the engine's over the same window; then
`crawltop demo` in the TUI in a pty of its own, paused, its CPU. Prints each figure in
% of one core, and the medians (targets: detached <= 1%, monitor <= 3%, TUI <= 3%).
Runs in a private run and state directory.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

CLI = [sys.executable, "-m", "crawltop.cli"]


def cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ctl(*args: str) -> dict:
    out = subprocess.run([*CLI, "ctl", *args], capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout) if args[-1] == "status" and out.returncode == 0 else {}


def wait(name: str, cond, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = ctl(name, "status")
        if s and cond(s):
            return s
        time.sleep(0.3)
    raise SystemExit(f"{name}: condition not reached")


def in_pty(argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """A process in a 120x40 pty whose output a thread reads and throws away."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color")
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return proc, master


def share(pid: int, seconds: float) -> float:
    before = cpu(pid)
    time.sleep(seconds)
    return 100 * (cpu(pid) - before) / seconds


def one_round(seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    subprocess.run([*CLI, "demo", "--detach", "--name", "idle"], check=True, capture_output=True, timeout=120)
    try:
        ctl("idle", "pause")
        engine = wait("idle", lambda s: s["busy"] == 0)["pid"]
        time.sleep(1)
        out["detached engine"] = share(engine, seconds)
        monitor, master = in_pty([*CLI, "attach", "idle"])
        wait("idle", lambda s: s["clients"] >= 2)
        time.sleep(2)  # its start-up is not idle
        m0, e0 = cpu(monitor.pid), cpu(engine)
        time.sleep(seconds)
        out["attached monitor"] = 100 * (cpu(monitor.pid) - m0) / seconds
        out["engine, monitor attached"] = 100 * (cpu(engine) - e0) / seconds
        monitor.terminate()
        monitor.wait(timeout=30)
        os.close(master)
    finally:
        ctl("idle", "stop")
    tui, master = in_pty([*CLI, "demo", "--name", "idle-tui", "--exit-on-finish"])
    try:
        wait("idle-tui", lambda s: s["pages"] > 0)
        ctl("idle-tui", "pause")
        wait("idle-tui", lambda s: s["busy"] == 0)
        time.sleep(2)
        out["same-loop TUI"] = share(tui.pid, seconds)
    finally:
        ctl("idle-tui", "stop")
        tui.wait(timeout=60)
        os.close(master)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ctidle"))
    os.environ.update(CRAWLTOP_RUN_DIR=str(base / "run"), XDG_STATE_HOME=str(base / "state"))
    results: dict[str, list[float]] = {}
    for i in range(args.rounds):
        for what, pct in one_round(args.seconds).items():
            results.setdefault(what, []).append(pct)
            print(f"round {i + 1}  {what:26} {pct:5.2f}% of a core", flush=True)
    targets = {"detached engine": 1.0, "attached monitor": 3.0, "same-loop TUI": 3.0}
    print()
    for what, values in results.items():
        target = f"(target <= {targets[what]:g}%)" if what in targets else ""
        print(f"median {what:26} {statistics.median(values):5.2f}% of a core  {target}")


if __name__ == "__main__":
    main()
