"""The CLI side of archives: the WARC sink a crawl, a resume or a `join` gets from
`--warc`, `--warc-max-size`, `--no-dedup` and `--dedup-from`, and the WACZ written at
the end (`--wacz`) or by `export --wacz`.

Which archive options a --state crawl used are kept in its settings (`warc`,
`warc_options`), so `resume` writes on into the same series with the same rules.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from .. import __version__
from ..core.config import CrawlConfig
from ..core.errors import UsageError
from ..core.monitor.sanitize import clean

SQLITE_MAGIC = b"SQLite format 3\x00"


def options_of(args: argparse.Namespace, saved: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The archive options in force: this command line's, else those saved with the crawl."""
    warc = getattr(args, "warc", None)
    saved = dict(saved or {})
    if not warc and not saved.get("warc"):
        needs_warc(args)
        return None
    out: dict[str, Any] = {"warc": os.path.abspath(warc) if warc else saved["warc"],
                           "max_size": saved.get("max_size"), "dedup": saved.get("dedup", True),
                           "dedup_from": list(saved.get("dedup_from", [])), "wacz": saved.get("wacz")}
    if getattr(args, "warc_max_size", None):
        out["max_size"] = args.warc_max_size
    if getattr(args, "no_dedup", False):
        out["dedup"] = False
    for f in getattr(args, "dedup_from", None) or ():
        if not os.path.isfile(f):
            raise UsageError(f"--dedup-from {f}: no such file")
        if os.path.abspath(f) not in out["dedup_from"]:
            out["dedup_from"].append(os.path.abspath(f))
    if getattr(args, "wacz", None):
        out["wacz"] = os.path.abspath(args.wacz)
    return out


_WARC_SETTINGS = (("--wacz", "wacz"), ("--dedup-from", "dedup_from"), ("--warc-max-size", "warc_max_size"),
                  ("--no-dedup", "no_dedup"))


def needs_warc(args: argparse.Namespace) -> None:
    """A setting of the WARC series given without one is a usage error: `--wacz site.wacz`
    alone wrote nothing at all, and said nothing of it."""
    for option, dest in _WARC_SETTINGS:
        if getattr(args, dest, None):
            raise UsageError(f"{option} needs --warc FILE.warc.gz: it is a setting of the WARC files")


def archive_argv(args: argparse.Namespace) -> list[str]:
    """The archive options of a `--processes` child (`join`): each writes its own files of
    the one series (core/output/warcfiles.py); the parent packs the WACZ at the end."""
    options = options_of(args)
    if not options:
        return []
    out = ["--warc", options["warc"]]
    if options.get("max_size"):
        out += ["--warc-max-size", str(options["max_size"])]
    if not options.get("dedup", True):
        out.append("--no-dedup")
    for f in options.get("dedup_from", ()):
        out += ["--dedup-from", f]
    return out


def sink(options: Mapping[str, Any], config: CrawlConfig, shared: tuple[str, str] | None = None) -> Any:
    """A WarcSink for these options; a one-line UsageError if its folder is not writable.
    `shared`: (Redis URL, crawl name) of a shared crawl, whose processes share one digest map."""
    from ..core.output.dedup import Digests
    from ..core.output.warc import DEFAULT_MAX_SIZE, WarcSink
    from ..core.storage.schema import config_to_json

    folder = os.path.dirname(options["warc"]) or "."
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise UsageError(f"--warc {options['warc']}: cannot write in {folder}")
    digests = Digests()
    if shared is not None:
        from ..core.cluster.digests import SharedDigests

        digests = SharedDigests(*shared)
    cdxj_files = []
    if options.get("dedup", True):
        for f in options.get("dedup_from", ()):
            if _is_state_file(f):
                digests.add_many(_state_digests(f))
            else:
                cdxj_files.append(f)
    info = {"crawltop-settings": config_to_json(config)}  # secrets redacted (core/secrets.py)
    return WarcSink(options["warc"], info=info, max_size=options.get("max_size") or DEFAULT_MAX_SIZE,
                    dedup=bool(options.get("dedup", True)), dedup_from=cdxj_files, digests=digests)


def _is_state_file(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _state_digests(path: str) -> Iterable[tuple[str, str, str]]:
    """(digest, url, fetched_at) of a --state file's 2xx records: an earlier crawl's payloads."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT json_extract(data, '$.digest'), json_extract(data, '$.url'), json_extract(data, '$.fetched_at'),"
            " json_extract(data, '$.status') FROM records").fetchall()
    except sqlite3.Error as exc:
        raise UsageError(f"--dedup-from {path}: not a crawltop state file ({exc})") from None
    finally:
        conn.close()
    return [(d, u, t) for d, u, t, s in rows if d and u and t and isinstance(s, int) and 200 <= s < 300]


def wacz(options: Mapping[str, Any] | None, *, quiet: bool = False) -> int:
    """`--wacz FILE`: pack the archive when the crawl ends; 0, or 1 with a one-line reason."""
    if not options or not options.get("wacz"):
        return 0
    return pack(options["warc"], options["wacz"], quiet=quiet)


def pack(warc: str, out: str, *, quiet: bool = False) -> int:
    from ..core.output.wacz import pack as pack_wacz
    from ..core.output.warcfiles import Series

    series = Series.of(warc)
    files = series.finished()
    if not files:
        print(f"crawltop: error: no finished WARC files named {clean(series.stem)}-NNNNN.warc.gz in "
              f"{clean(series.directory)}", file=sys.stderr)
        return 2
    index = series.cdxj()
    try:
        packed = pack_wacz(files, out, index=index if os.path.exists(index) else None,
                           title=series.stem, software=f"crawltop {__version__}")
    except (OSError, ValueError) as exc:
        print(f"crawltop: error: writing {clean(out)} failed: {clean(exc)}", file=sys.stderr)
        return 1
    if not quiet:
        print(f"crawltop: {clean(out)}: WACZ of {packed.warcs} WARC files, {packed.index_lines} index lines, "
              f"{packed.pages} pages, {packed.size} bytes", file=sys.stderr)
    return 0
