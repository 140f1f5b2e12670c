"""An output file that is also an input of the same command: refused before anything opens.

Why: `export s.db --jsonl s.db` truncated the state file to nothing, `report r.jsonl -o
r.jsonl` replaced the records with their report, and `crawl --state s.db -o s.db`
wrote records into the SQLite file until it was malformed. Each is one mistyped name,
and each lost a crawl. Every command's file options are checked here, by what they are
(a hard link or a symlink to the same file counts); one kind of sharing is meant and
allowed: `--cookies F --save-cookies F` updates a cookie jar in place, as curl's
`-b F -c F` does.
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

from ..core.errors import UsageError

# (what the file is to the user, the argparse dest); a dest may hold a list (repeatable options)
_INPUTS = (("the state file", "state"), ("the records read", "source"), ("--cookies", "cookies"),
           ("--dedup-from", "dedup_from"), ("--header @FILE", "header"))
_OUTPUTS = (("-o", "output"), ("--jsonl", "jsonl"), ("--csv", "csv"), ("--wacz", "wacz"),
            ("--save-cookies", "save_cookies"))
_MEANT = {("--save-cookies", "--cookies")}


def check(args: argparse.Namespace) -> None:
    """UsageError (exit 2) naming the two options when an output would overwrite another
    file option's file."""
    outputs = list(_files(args, _OUTPUTS))
    inputs: tuple[tuple[str, str], ...] = _INPUTS
    if getattr(args, "redis", None) and args.command in ("export", "report"):
        inputs = _INPUTS[2:]  # their PATH|NAME is a crawl's name in Redis, not a file
    for i, (out_option, out) in enumerate(outputs):
        for other_option, other in [*_files(args, inputs), *outputs[:i]]:
            if (out_option, other_option) not in _MEANT and _same(out, other):
                what = other_option if other_option.startswith("the ") else f"the file of {other_option}"
                raise UsageError(f"{out_option} {out} is also {what}: it would be overwritten")


def _files(args: argparse.Namespace, options: tuple[tuple[str, str], ...]) -> Iterator[tuple[str, str]]:
    for option, dest in options:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if not isinstance(v, str) or not v or v == "-":
                continue
            if dest == "header":
                if not v.startswith("@"):
                    continue
                v = v[1:]
            yield option, v


def _same(a: str, b: str) -> bool:
    """One file, or one path to be: a device or pipe (`/dev/null`) can't be overwritten."""
    try:
        if os.path.exists(b) and not os.path.isfile(b):
            return False
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return os.path.realpath(a) == os.path.realpath(b)
