"""A fresh clone is the test: what git tracks must work on a machine that has nothing else.

A tracked symlink into /tmp once passed CI (its target existed there) and broke `make test`
on every other machine, so the tree is checked as git holds it, not as this disk has it."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK_MODE = "120000"


def _tracked() -> list[tuple[str, str]]:
    """(mode, path) of every file git tracks here."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    rows = []
    for entry in out.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            rows.append((meta.split()[0], path))
    return rows


def test_no_tracked_symlink() -> None:
    links = [path for mode, path in _tracked() if mode == LINK_MODE]
    assert links == [], f"tracked symlinks point nowhere on a fresh clone: {links}"


def test_the_venvs_are_ignored_as_names_whatever_they_are() -> None:
    """`.venv-archive/` (with a slash) matched only a folder, so a symlink of that name was committed."""
    _tracked()  # skips outside a git checkout
    for name in (".venv", ".venv-archive", ".venv-newest"):
        probe = subprocess.run(["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT)
        assert probe.returncode == 0, f"{name} is not ignored as a name"
    assert [p for _, p in _tracked() if p.startswith(".venv")] == []
