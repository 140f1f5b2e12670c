"""Secret options in any spelling (a review's finds): an abbreviation (`--prox URL`)
or `--opt=value` never slips past the checks that keep --header and --proxy off the
dashboard's screen and a detached crawl's command line; the CLI refuses abbreviations."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawltop.cli.detach import _split_secrets
from crawltop.tui.top.launch import parse_command

PW = "pa55-S3CRET-word"


@pytest.mark.parametrize("words", [
    ["--prox", f"http://u:{PW}@127.0.0.1:9"], [f"--prox=http://u:{PW}@127.0.0.1:9"],
    ["--proxy", f"http://u:{PW}@127.0.0.1:9"], [f"--heade=Authorization: {PW}"], ["--he", f"X: {PW}"]])
def test_the_prompt_refuses_a_secret_option_in_any_spelling(words: list[str]) -> None:
    with pytest.raises(ValueError, match="hidden field"):
        parse_command(" ".join(["http://127.0.0.1:9/", *(repr(w) if " " in w else w for w in words)]))


def test_the_prompt_still_takes_options_that_only_start_alike() -> None:
    assert parse_command("http://127.0.0.1:9/ --header-host 127.0.0.1") == [
        "http://127.0.0.1:9/", "--header-host", "127.0.0.1"]


def test_a_detaching_parent_hides_every_spelling() -> None:
    args = ["crawl", "http://127.0.0.1:9/", "--prox", f"http://u:{PW}@h", f"--heade=X: {PW}", "--he", PW, "-c", "2"]
    keep, hidden = _split_secrets(args)
    assert not any(PW in a for a in keep), keep
    assert keep == ["crawl", "http://127.0.0.1:9/", "-c", "2"]
    assert len(hidden) == 5


def test_the_cli_refuses_an_abbreviated_secret_option(tmp_path: Path) -> None:
    env = {"CRAWLTOP_RUN_DIR": str(tmp_path / "run"), "XDG_STATE_HOME": str(tmp_path / "xdg"),
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "crawltop.cli", "crawl", "http://127.0.0.1:9/", "--prox",
                           f"http://u:{PW}@127.0.0.1:9", "--detach"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "unrecognized arguments" in proc.stderr
    assert not list((tmp_path / "xdg").rglob("*.log"))  # nothing was started


def test_a_bad_proxy_url_does_not_echo_its_password(tmp_path: Path) -> None:
    from crawltop.core.errors import UsageError
    from crawltop.core.secrets import split_proxy
    with pytest.raises(UsageError) as info:
        split_proxy(f"http://user:{PW}")  # no @ (or a / in it): urlsplit: "port could not be cast ... as '<password>'"
    assert "S3CRET" not in str(info.value) and "bad --proxy URL" in str(info.value)
    env = {"CRAWLTOP_RUN_DIR": str(tmp_path / "run"), "XDG_STATE_HOME": str(tmp_path / "xdg"),
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "crawltop.cli", "crawl", "http://127.0.0.1:9/", "--proxy",
                           f"http://user:{PW}", "--headless"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "bad --proxy URL" in proc.stderr, proc.stderr
    assert "S3CRET" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("flag", ["-h", "--help", "--version"])
def test_the_prompt_refuses_help_and_version(flag: str) -> None:
    with pytest.raises(ValueError, match="starts no crawl"):
        parse_command(f"http://127.0.0.1:9/ {flag}")


async def test_a_start_that_prints_no_crawl_name_is_not_a_success(tmp_path: Path, monkeypatch) -> None:
    from crawltop.tui.top.launch import start_crawl
    monkeypatch.setenv("CRAWLTOP_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    ok, why = await start_crawl(["--help"], [], tmp_path)  # past the prompt's check: exit 0, help on stdout
    assert not ok and "nothing was started" in why, why
