"""The end-of-crawl report (cli/endreport.py) read back by field, and the demo site it is
compared on, for the tests of one process, `resume` and `--processes`."""
from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def report_fields(out: str) -> dict[str, str]:
    """The end report's fields by name: `records` -> `2,585`, `outcomes` -> its line,
    `status 404` -> `21`, `error http-status` -> `2`; notes under the title are left out."""
    fields: dict[str, str] = {}
    section = ""
    for line in out[out.index("crawltop report: "):].splitlines()[1:]:
        if not line.startswith("  ") or line.startswith("  redis:"):
            break
        text = line.strip()
        if line.startswith("    "):  # a row of the section above: status codes, errors, top error URLs
            left, _, right = text.partition("  ")
            if section == "status codes":
                fields[f"status {left}"] = right.strip()
            elif section == "errors":
                fields[f"error {right.strip().split(':')[0]}"] = left
            continue
        head, colon, rest = text.partition(": ")
        if text.endswith(":") or colon:
            section = text.rstrip(":") if text.endswith(":") else head
            fields[section] = rest
        elif text.startswith(("crawl '", "this process")):
            continue  # a note: which crawl, on Redis
        else:
            for pair in text.split("  "):
                name, _, value = pair.strip().rpartition(" ")
                fields[name] = value
    return fields


def count(fields: dict[str, str], name: str) -> int:
    return int(fields[name].replace(",", ""))


@contextlib.contextmanager
def demo_site() -> Iterator[str]:
    """The bundled demo site, fast: 2,585 records of every outcome, the same on every crawl,
    served by its own process."""
    proc = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve", "--fast"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), url
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def committed(db: Path) -> int:
    """Records committed so far in a state file, read from another process as any WAL reader would."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return conn.execute("SELECT count(*) FROM records").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0
