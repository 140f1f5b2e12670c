"""Every crawl listens on its control socket: claim the name, wrap the crawler.

`listen()` runs before the crawl starts, so a name clash is a one-line error (exit 2)
and nothing has been fetched yet. In a detached child (cli/detach.py) it also moves the
log to `<state dir>/log/NAME.log` once the name is known, ignores SIGHUP, and tells the
waiting parent the crawl is listening.
"""
from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from ..core.sockets.rundir import claim, state_dir
from . import hangup

if TYPE_CHECKING:  # the server and the engine's types: imported by the commands that crawl
    from ..core.sockets.server import Listening
    from ..core.surface import Engine

E = TypeVar("E", bound="Engine")

DETACH_FD = "CRAWLTOP_DETACH_FD"
DETACH_LOG = "CRAWLTOP_DETACH_LOG"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=None, metavar="NAME",
                   help="name of this crawl for attach/ctl/ls (default: from the root's host, made unique)")
    p.add_argument("--detach", action="store_true",
                   help="run in the background, outliving the terminal; prints the crawl's name (default: off)")
    hangup.add_argument(p)


def listen(crawler: E, args: argparse.Namespace) -> Listening[E]:
    from ..core.sockets.server import Listening

    host = getattr(args, "socket_base", None)  # a cluster member: named after its crawl
    if host is None:
        host = "demo" if getattr(args, "command", None) == "demo" else urlsplit(crawler.roots[0]).hostname
    name, path, sock = claim(getattr(args, "name", None), host)
    ready = None
    fd = os.environ.pop(DETACH_FD, None)
    if fd is not None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        ready = _detached_child(int(fd), name)
    listening = Listening(crawler, name, path, sock, on_listening=ready)
    listening.control.mode = "detached" if fd is not None else "headless"  # run_crawler: "tui"
    return listening


def _detached_child(fd: int, name: str) -> Callable[[str], None]:
    tmp = os.environ.pop(DETACH_LOG, None)
    log = state_dir() / "log" / f"{name}.log"
    if tmp and Path(tmp).exists():
        os.replace(tmp, log)  # our stdout/stderr keep writing to it under its new name
        os.write(fd, f"log {log}\n".encode())

    def ready(name: str) -> None:
        os.write(fd, f"ready {name}\n".encode())
        os.close(fd)

    return ready
