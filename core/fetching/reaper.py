"""No Chromium outlives crawltop, even when crawltop itself is killed with SIGKILL.

A normal end closes the browser (core/fetching/browserlife.py `close`), and Playwright's driver
kills its browsers when crawltop's end closes its pipe. Neither covers everything: a SIGKILL of
crawltop's whole process group takes the driver too, and Chromium runs in a session of its own
(Playwright starts it detached), so nothing would end it. A small watchdog does: a separate
Python process, in a session of its own so a terminal's signals don't end it first, told each
profile directory the crawl launches Chromium on, through a pipe only crawltop holds. When
that pipe closes (crawltop ended, however it ended), it kills the process group of every
process whose command line names one of those profiles, and removes the directories (and
the temporary folder of Chromium's socket each one links to).
Chromium's crash reporter, whose handler would leave the group, is off (chromium.py's FLAGS).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys

# The watchdog itself: reads crawltop's process group, then profile paths, until EOF; then
# kills (each process that names a profile, and its group unless that is crawltop's) and
# removes. The standard library only, so it starts in milliseconds and cannot fail to import.
WATCH = r"""
import os, shutil, signal, sys, time
lines = [line.rstrip("\n") for line in sys.stdin if line.strip()]
spare, profiles = {os.getpgid(0), int(lines[0])} if lines else {os.getpgid(0)}, lines[1:]
marks = [p.encode() for p in profiles]
def ours():
    pids, groups = set(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as fh:
                cmd = fh.read()
            if any(m in cmd for m in marks):
                pids.add(int(entry))
                groups.add(os.getpgid(int(entry)))
        except OSError:
            continue
    return pids, groups - spare
deadline, killed = time.monotonic() + 10, False  # a loaded machine may take seconds to end them all
while time.monotonic() < deadline:
    pids, groups = ours() if marks else (set(), set())
    if not pids:
        break
    killed = True
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
for p in profiles:
    # Chromium's socket lives in a temporary folder of its own, which the profile links to
    try:
        socket = os.readlink(os.path.join(p, "SingletonSocket"))
    except OSError:
        socket = ""
    folder = os.path.dirname(socket)
    if os.path.basename(folder).startswith("org.chromium.Chromium."):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(p, ignore_errors=True)
time.sleep(0.2 if killed else 0)
for p in profiles if killed else ():  # once more: a process the kill had not reached yet may have written since
    shutil.rmtree(p, ignore_errors=True)
"""


class Reaper:
    """The watchdog of one crawl's browsers: `watch` each profile as it is made; `close` at
    the crawl's end (it then does its pass and exits, and is waited for: no zombie)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", WATCH], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        self._send(str(os.getpgid(0)))  # crawltop's own group is never killed, whatever runs in it

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.write(line.encode() + b"\n")
                proc.stdin.flush()

    def watch(self, profile: str) -> None:
        self._send(profile)

    def close(self, wait: float = 15.0) -> None:
        """Close its pipe and wait for its pass (the browser is closed by then: it finds
        nothing, or what a close left behind)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

