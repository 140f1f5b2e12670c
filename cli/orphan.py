"""A `crawltop attach` started by `crawltop web` dies with it, however `web` ends.

textual-serve runs one attach per browser tab, through `sh -c`. `web` puts its pid in
CRAWLTOP_WEB_PID; the attach then asks the kernel for SIGTERM when its parent dies
(prctl PR_SET_PDEATHSIG), which covers a SIGKILL of `web` too, and checks the parent is
still there after asking (it may have died just before). Whatever the parent, the pipes
are watched as well (tui/terminal.py PipeWebDriver): EOF on stdin or EPIPE on stdout
ends the monitor. SIGTERM ends it cleanly (WebDriver's handler): it detaches, the crawl
goes on.
"""
from __future__ import annotations

import os

from ..core.cluster.server import die_with_parent

WEB_PID = "CRAWLTOP_WEB_PID"


def watch_web_parent() -> None:
    """In an attach child of `crawltop web`: die with it. Exits at once if it is gone already."""
    web = os.environ.get(WEB_PID)
    if not web or not web.isdigit():
        return
    die_with_parent()
    if os.getppid() == 1 or not _alive(int(web)):
        os._exit(0)  # web died before we could ask: nobody will ever watch this monitor


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
