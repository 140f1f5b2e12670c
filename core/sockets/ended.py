"""What a crawl leaves in the run directory when it ends: a small summary, so the dashboard
(`crawltop` alone) shows how it ended even if nobody was watching at the time.

`<run dir>/.ended/<name>.json` (0600, written atomically): its name, pid, root, when it
started and ended, how it ended (done, stopped and by what, crashed) and its summary
(core/monitor/summary.py). It stays until a dashboard dismisses it, until a crawl of the
same name ends and writes its own, or until KEEP newer ones push it out. Never part of
`ls` (a dot directory, not a socket).
No asyncio here: the dashboard reads these from a timer on its loop, a few small files.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .rundir import NAME, run_dir

DIR = ".ended"
MAX_BYTES = 64 * 1024  # a summary is well under 2 KiB; anything bigger is not ours
KEEP = 200  # summaries kept: a cron job's hourly crawls must not grow the list (and the dir) forever


def ended_dir(*, create: bool = False) -> Path:
    path = run_dir(create=create) / DIR
    if create and not path.exists():
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
    return path


def write(name: str, record: dict[str, Any]) -> Path | None:
    """Leave the summary of crawl `name`; None if the run directory is gone (never raises
    on a full or read-only disk: a crawl's end must not fail for its epitaph)."""
    try:
        d = ended_dir(create=True)
        tmp = d / f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, separators=(",", ":"))
        final = d / f"{name}.json"
        os.replace(tmp, final)
        _prune(d)
        return final
    except OSError:
        return None


def _prune(d: Path) -> None:
    """Keep the KEEP newest summaries."""
    entries = [e for e in os.scandir(d) if e.name.endswith(".json") and e.is_file(follow_symlinks=False)]
    if len(entries) <= KEEP:
        return
    entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    for e in entries[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)


def read_all() -> dict[str, dict[str, Any]]:
    """Every ended crawl's record by name; unreadable or foreign files are skipped."""
    d = ended_dir()
    out: dict[str, dict[str, Any]] = {}
    try:
        entries = list(os.scandir(d))
    except OSError:
        return out
    for entry in entries:
        name = entry.name[:-5] if entry.name.endswith(".json") else ""
        if not NAME.fullmatch(name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not entry.is_file(follow_symlinks=False) or st.st_uid != os.getuid() or st.st_size > MAX_BYTES:
                continue
            record = _checked(_read(entry.path))
        except (OSError, ValueError, RecursionError):  # RecursionError: [[[[... nested deep
            continue
        if record is not None:
            record["name"] = name
            out[name] = record
    return out


def _read(path: str) -> Any:
    """The JSON in `path`: never through a symlink (swapped in after the stat), never more than
    MAX_BYTES (it grew after the stat)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError("too big")
    return json.loads(data.decode("utf-8"))


def _checked(record: Any) -> dict[str, Any] | None:
    """The record with each field of its type, or None: a file not written by write()."""
    if not isinstance(record, dict) or not isinstance(record.get("summary"), dict):
        return None
    out: dict[str, Any] = {"summary": record["summary"]}
    for key, kind in (("root", str), ("how", str), ("by", str), ("pid", int),
                      ("started", float), ("ended", float)):
        value = record.get(key)
        if value is None:
            continue
        if kind is str and not isinstance(value, str):
            return None
        if kind is not str and (isinstance(value, bool) or not isinstance(value, int | float)
                                or not 0 <= value < 1e13):
            return None
        out[key] = kind(value)
    return out


def dismiss(name: str) -> None:
    """Forget an ended crawl (the dashboard's dismiss key)."""
    if NAME.fullmatch(name):
        with contextlib.suppress(OSError):
            os.unlink(ended_dir() / f"{name}.json")
