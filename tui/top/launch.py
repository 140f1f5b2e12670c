"""The dashboard's `n`: start a crawl, detached, from what was typed in the prompt.

It runs `crawltop crawl ARGS --detach` as a child process in the directory the dashboard
was started in, so relative paths (`-o`, `--state`, `--warc`, `--save-cookies`) mean what
they would have meant on the command line there. `--header` and `--proxy` are typed in a
field of their own that shows nothing; they reach the crawl through its environment, as a
detaching parent passes them (core/secrets.py SECRET_ARGS), never on a command line or a
screen. A line with --browser (the form's switch) is checked here first, as the crawl would
check it: without Playwright or a Chromium the form says why and nothing starts. The
environment of the crawl's own process keeps the secrets for its life (/proc/PID/environ,
readable by the same user and root only: os.environ.pop does not erase it); this process
drops its copy once the child is started, though Python may not overwrite the memory.
"""
from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

from ...core.monitor.sanitize import clean
from ...core.secrets import SECRET_ARGS, SECRET_OPTIONS, secret_option
from ...core.sockets.rundir import NAME

START_TIMEOUT = 120.0


def parse_command(text: str) -> list[str]:
    """The visible field's words: a URL and options, as after `crawltop crawl`. ValueError
    with the reason when it cannot be used (a secret option typed in the open, bad quoting)."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot read that line: {exc}") from None
    if words[:1] == ["crawltop"]:
        words = words[1:]
    if words[:1] == ["crawl"]:
        words = words[1:]
    if not words:
        raise ValueError("type a URL, and options as on the command line")
    for w in words:
        hidden = secret_option(w)
        if hidden is not None:
            raise ValueError(f"type {hidden} in the hidden field below, not here (it would show)")
        if w in ("-h", "--help", "--version"):
            raise ValueError(f"{w} starts no crawl: run `crawltop crawl --help` in a shell")
        if w in ("--detach", "--headless"):
            raise ValueError(f"{w} is implied: a crawl started here is always detached")
    return words


def parse_secrets(text: str) -> list[str]:
    """The hidden field's words: only --header and --proxy with their values."""
    try:
        words = shlex.split(text)
    except ValueError:
        raise ValueError("cannot read the hidden field (check its quotes)") from None
    it = iter(words)
    for w in it:
        name = w.split("=", 1)[0]
        if name not in SECRET_OPTIONS:  # exactly: the crawl's parser refuses abbreviations
            raise ValueError("the hidden field takes only --header and --proxy")
        if "=" not in w and next(it, None) is None:
            raise ValueError(f"{name} needs a value")
    return words


def browser_refusal(words: list[str], cwd: Path) -> str | None:
    """With --browser in the line (the form's switch adds it): what `crawl --browser` would
    refuse it with (no Playwright, no Chromium, a --browser-path that is no executable),
    asked here with the same check (core/fetching/browser.py), so the form says it at once
    and no crawl is started; None when its browser can run, or none is asked for."""
    if "--browser" not in words:
        return None
    from ...core.errors import UsageError
    from ...core.fetching.browser import check

    path = next((w.partition("=")[2] for w in words if w.startswith("--browser-path=")), None)
    if path is None and "--browser-path" in words[:-1]:
        path = words[words.index("--browser-path") + 1]
    try:
        check(str(cwd / path) if path else None)  # relative to where the crawl will run
    except UsageError as exc:
        return str(exc)
    return None


async def start_crawl(args: list[str], secrets: list[str], cwd: Path) -> tuple[bool, str]:
    """(True, the crawl's name) once it listens, or (False, the one-line reason it did not start)."""
    env = dict(os.environ)
    env[SECRET_ARGS] = json.dumps(secrets)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", *args, "--detach", cwd=str(cwd), env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        return False, f"could not run crawltop: {exc}"
    try:
        out, err = await asyncio.wait_for(proc.communicate(), START_TIMEOUT)
    except TimeoutError:
        proc.kill()
        return False, "the crawl did not start in time"
    finally:
        env.pop(SECRET_ARGS, None)
    name = out.decode(errors="replace").strip().rpartition("\n")[2].strip()
    if proc.returncode == 0 and NAME.fullmatch(name):
        return True, name
    if proc.returncode == 0:  # something else on stdout (help text): no crawl was started
        return False, "crawltop printed no crawl name: nothing was started"
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    why = lines[-1] if lines else f"crawltop exited with {proc.returncode}"
    return False, clean(why.removeprefix("crawltop: error: "), 300)
