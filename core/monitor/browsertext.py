"""Chromium's numbers (--browser) as words, one wording wherever an operator looks: the
headless progress line (cli/headless.py), `crawltop ls` (cli/commands/ls.py) and the
dashboard's detail line (tui/top/app.py) say what the Workers panel's title says
(tui/panels/workers.py): `chromium 392.9 MB  restarts 2`.

Pure functions of plain numbers (a BrowserView's, a `status` reply's, a Summary's); no
Textual, no Rich. A crawl without --browser has none of them, and its lines stay as they were.
"""
from __future__ import annotations

MB = 1024 * 1024


def memory(n: int | float) -> str:
    """'392.9 MB' (as tui/fmt.py human_bytes writes it); '-' before the first reading."""
    if n <= 0:
        return "-"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def words(mem: int | float, restarts: int) -> str:
    """'chromium 392.9 MB restarts 2': the headless line's group."""
    return f"chromium {memory(mem)} restarts {restarts}"


def cell(mem: int | float, restarts: int) -> str:
    """'393M r2': `ls`'s CHROMIUM column, kept short for 80 columns (whole megabytes)."""
    return f"{round(mem / MB)}M r{restarts}" if mem > 0 else f"- r{restarts}"
