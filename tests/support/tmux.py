"""A tmux server of its own for the tests of real terminals (issues 20 and 30)."""
from __future__ import annotations

import os
import shlex
import subprocess
import uuid

import pytest

# The `tmux` marker: skipped without tmux, failed with CI set (the rule is in tests/conftest.py).
needs_tmux = pytest.mark.tmux


class Tmux:
    """A tmux server of its own (-L), killed at the end whatever happened."""

    def __init__(self) -> None:
        self.sock = f"ct20-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str, check: bool = False) -> str:
        done = subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=30)
        if check and done.returncode:
            raise AssertionError(f"tmux {args[0]} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def new(self, command: str, width: int = 100, height: int = 30, keep: bool = False) -> None:
        """Starts `command` in a detached session. With `keep` its pane stays after it exits,
        so a test that fails can still show what the command printed last."""
        env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("CRAWLTOP_RUN_DIR", "XDG_STATE_HOME"))
        shown = ("set-option", "-g", "remain-on-exit", "on", ";") if keep else ()
        self.run("start-server", ";", *shown, "new", "-d", "-x", str(width), "-y", str(height),
                 f"env {env} {command}", check=True)

    def screen(self) -> str:
        return self.run("capture-pane", "-p")

    def kill_server(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True, timeout=30)
