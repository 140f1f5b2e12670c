"""`crawltop crawl|demo|resume ... --detach`: the crawl in the background, out of reach of SIGHUP.

The parent re-runs the same command line without --detach (and with --headless) as a
child in a new session (setsid), stdin on /dev/null, stdout and stderr in a log under
the state directory. It waits on a pipe until the child says it is listening, prints
the crawl's name and exits 0. If the child dies first (a name clash, a bad state file),
the parent prints the child's log and exits with the child's code. Re-running the
command rather than forking keeps the child free of the parent's state; the new
session is what a double fork would give: no controlling terminal, no SIGHUP from the
shell's process group.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..core.secrets import SECRET_ARGS, secret_option
from ..core.sockets.rundir import state_dir
from .listen import DETACH_FD, DETACH_LOG

READY_TIMEOUT = 600.0  # a resume of a big state file may take a while to open


def spawn(argv: Sequence[str]) -> int:
    """Start the detached child; 0 and its name on stdout once it listens."""
    args = [a for a in argv if a != "--detach"]
    if "--headless" not in args:
        args.append("--headless")
    args, hidden = _split_secrets(args)
    logs = state_dir() / "log"
    logs.mkdir(mode=0o700, exist_ok=True)
    log_path = logs / f".starting-{os.getpid()}-{time.monotonic_ns()}.log"
    r, w = os.pipe()
    env = dict(os.environ, **{DETACH_FD: str(w), DETACH_LOG: str(log_path), SECRET_ARGS: json.dumps(hidden)})
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "crawltop.cli", *args], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, pass_fds=(w,), start_new_session=True, env=env)
    os.close(w)
    name, log_path = _wait_ready(r, log_path)
    os.close(r)
    if name is not None:
        print(name, flush=True)
        proc.returncode = 0  # it lives on without us: no "still running" warning
        return 0
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = 1
    try:
        text = log_path.read_text(errors="replace").strip()
        if log_path.name.startswith(".starting-"):
            log_path.unlink()
    except OSError:
        text = ""
    print(text or "crawltop: error: the detached crawl did not start", file=sys.stderr)
    return code or 1


def _split_secrets(args: list[str]) -> tuple[list[str], list[str]]:
    """(args, the --header and --proxy options): the child gets those in its environment,
    which only its user and root can read (/proc/PID/environ, for the child's whole life:
    popping it from os.environ does not erase it), not on its command line, which `ps` shows everyone for
    as long as the crawl runs."""
    keep: list[str] = []
    hidden: list[str] = []
    it = iter(args)
    for a in it:
        if secret_option(a) is None:
            keep.append(a)
        elif "=" in a:
            hidden.append(a)
        else:  # any prefix (`--prox URL`): hidden too, though the parser refuses abbreviations
            hidden += [a, next(it, "")]
    return keep, hidden


def hidden_args() -> list[str]:
    """The secret options a detaching parent handed over. Popped so that children of this
    process do not inherit them; /proc/PID/environ still holds them (user and root only)."""
    raw = os.environ.pop(SECRET_ARGS, None)
    return [str(a) for a in json.loads(raw)] if raw else []


def _wait_ready(r: int, log_path: Path) -> tuple[str | None, Path]:
    buf = b""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 4096)
        if not chunk:
            break
        buf += chunk
        for line in buf.decode(errors="replace").splitlines():
            kind, _, value = line.partition(" ")
            if kind == "log":
                log_path = Path(value)
            elif kind == "ready":
                return value, log_path
    return None, log_path
