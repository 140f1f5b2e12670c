"""`crawltop ls`: the live crawls of this user, a table or JSON.

A plain blocking socket client (core/sockets/blocking.py Client): no asyncio, no Textual."""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.errors import RemoteError, UsageError
from ...core.monitor import browsertext
from ...core.monitor.sanitize import clean
from ...core.sockets.blocking import Client
from ...core.sockets.rundir import live_sockets, run_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("ls", help="list the live crawls of this user")
    ls.add_argument("--json", action="store_true", help="one JSON array, for scripts (default: a table)")


def crawls(removed: list[Path] | None = None) -> list[dict[str, Any]]:
    """One row per live crawl, stale sockets cleaned up on the way (listed in `removed`)."""
    rows = []
    for path in live_sockets(removed):
        row: dict[str, Any] = {"name": path.name, "socket": str(path)}
        try:
            with Client(path, timeout=2.0) as c:
                row.update(c.call("status"))
        except RemoteError as exc:
            row.update(state="?", error=str(exc))
        rows.append(row)
    return rows


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    removed: list[Path] = []
    try:
        run_dir(create=False)
        rows = crawls(removed)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    for path in removed:  # once: the socket is gone now, so the next ls is silent about it
        print(f"crawltop: removed {path}: its crawl is gone (nothing listened on it)", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=None))
        return 0
    if not rows:
        print("no live crawls")
        return 0
    # CHROMIUM (memory, restarts) only when a crawl runs --browser: a plain list stays as it was
    browsers = any(isinstance(r.get("browser"), dict) for r in rows)
    table = [("NAME", "PID", "STATE", "MODE", "PAGES", "QUEUED", "PAGES/S") + (("CHROMIUM",) if browsers else ())
             + ("STARTED", "ROOT")]
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"])) if "started" in r else "?"
        table.append((r["name"], str(r.get("pid", "?")), r.get("state", "?"), r.get("mode", "?"),
                      str(r.get("pages", "?")), str(r.get("queued", "?")),
                      f"{r['rate_now']:.0f}" if "rate_now" in r else "?")
                     + ((browser_cell(r.get("browser")),) if browsers else ())
                     + (started, clean(r.get("root", ""), 80)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip())
    return 0


def browser_cell(b: Any) -> str:
    """'393M r2': Chromium's memory and restarts; '-' for a crawl without --browser."""
    try:
        return browsertext.cell(float(b["memory"]), int(b["restarts"]))
    except (TypeError, KeyError, ValueError, OverflowError):  # a foreign or damaged reply
        return "-"
