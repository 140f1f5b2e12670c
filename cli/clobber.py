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
_INPUTS = (("the state file", "state"), ("the records read", "source"), ("the file of --cookies", "cookies"),
           ("the file of --dedup-from", "dedup_from"), ("the file of --header @FILE", "header"))
_NAMES = ("state", "source")  # export's and report's PATH|NAME: a crawl's name with --redis
_OUTPUTS = (("-o", "output"), ("--jsonl", "jsonl"), ("--csv", "csv"), ("--wacz", "wacz"),
            ("--save-cookies", "save_cookies"))
_MEANT = {("save_cookies", "cookies")}  # a cookie jar updated in place
_STDOUT = "/dev/stdout"


def check(args: argparse.Namespace) -> None:
    """UsageError (exit 2) naming both when an output would overwrite another file option's
    file: an input, an output named before it, or what stdout was redirected to (`report
    r.jsonl >> r.jsonl` would read its own report back)."""
    inputs = [i for i in _INPUTS if not (i[1] in _NAMES and getattr(args, "redis", None)
                                         and args.command in ("export", "report"))]
    others = list(_files(args, inputs))
    outputs = list(_files(args, [(o, dest) for o, dest in _OUTPUTS]))
    if _prints_its_output(args) and os.path.isfile(_STDOUT):  # redirected to a file: an output
        outputs.insert(0, ("standard output", "", _STDOUT))  # (checked against the inputs only)
    for option, dest, path in outputs:
        for what, other_dest, other in others:
            if (dest, other_dest) not in _MEANT and _same(path, other):
                raise UsageError(f"{option} {path if path != _STDOUT else ''}".rstrip()
                                 + f" is also {what}: it would be overwritten")
        if path != _STDOUT:
            others.append((f"the file of {option}", dest, path))


def _prints_its_output(args: argparse.Namespace) -> bool:
    """Whether the command's main output goes to stdout: a crawl's report always; report's
    and export's only when asked (`-o -`, `--jsonl -`)."""
    if args.command == "report":
        return getattr(args, "output", "-") == "-"
    if args.command == "export":
        return "-" in (getattr(args, "jsonl", None), getattr(args, "csv", None))
    return True


def _files(args: argparse.Namespace, options: list[tuple[str, str]]) -> Iterator[tuple[str, str, str]]:
    """(label, dest, path) of each file named by these options; `-` (stdout) and a header
    given inline are not files."""
    for label, dest in options:
        value = getattr(args, dest, None)
        for v in value if isinstance(value, list) else [value]:
            if not isinstance(v, str) or not v or v == "-":
                continue
            if dest == "header":
                if not v.startswith("@"):
                    continue
                v = v[1:]
            yield label, dest, v


def _same(a: str, b: str) -> bool:
    """One file, or one path to be: a device or pipe (`/dev/null`) can't be overwritten."""
    try:
        if os.path.exists(b) and not os.path.isfile(b):
            return False
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return os.path.realpath(a) == os.path.realpath(b)
