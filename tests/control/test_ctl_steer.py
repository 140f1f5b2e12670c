"""`crawltop ctl NAME ignore|seed|host ...` against a detached crawl, in real processes:
scripts steer with the same methods as the keys."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ctl import cli, wait_gone, wait_status

pytestmark = pytest.mark.timeout(90)


async def test_ctl_ignore_seed_and_host(site: str, rundir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    rc, _, err = await cli("crawl", site, "--detach", "--name", "st", "-c", "4", "--no-robots", "-o", str(out))
    assert rc == 0, err
    s = await wait_status("st", lambda t: t["queued"] > 50)
    host = site.split("//")[1].rstrip("/")

    rc, outp, err = await cli("ctl", "st", "ignore", "add", r"/p/\d*7$")
    assert rc == 0 and outp.startswith(r"ignoring /p/\d*7$: ") and "queued URLs dropped" in outp, err
    dropped = int(outp.split(": ")[1].split()[0])
    assert dropped > 0
    rc, outp, err = await cli("ctl", "st", "ignore", "add", "x(?=y)")
    assert rc == 1 and "RE2 lacks" in err and err.count("\n") == 1
    rc, outp, err = await cli("ctl", "st", "ignore", "list")
    [rule] = [json.loads(line) for line in outp.splitlines()]
    assert rc == 0 and rule["pattern"] == r"/p/\d*7$" and rule["dropped"] == dropped

    rc, outp, err = await cli("ctl", "st", "seed", "ftp://nope/")
    assert rc == 1 and "not an http(s) URL" in err
    rc, outp, err = await cli("ctl", "st", "host", "delay", host, "0.01")
    assert rc == 0, err
    rc, outp, err = await cli("ctl", "st", "host", "delay", host, "-3")
    assert rc == 1 and "delay" in err
    rc, outp, err = await cli("ctl", "st", "host", "pause", host)
    assert rc == 0, err
    rc, outp, err = await cli("ctl", "st", "host", "resume", host)
    assert rc == 0 and outp.startswith(f"host {host} resumed"), err
    rc, outp, err = await cli("ctl", "st", "ignore", "remove", r"/p/\d*7$")
    assert rc == 0, err
    rc, outp, err = await cli("ctl", "st", "ignore", "remove", r"/p/\d*7$")
    assert rc == 1 and "no ignore pattern" in err
    rc, outp, err = await cli("ctl", "st", "ignore", "frobnicate")
    assert rc == 1 and "usage: crawltop ctl NAME ignore" in err

    pid = s["pid"]
    assert (await cli("ctl", "st", "stop"))[0] == 0
    await wait_gone(pid)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    ignored = [r for r in records if r["error_kind"] == "ignored"]
    assert len(ignored) == dropped and all(r["url"].endswith("7") for r in ignored)
    assert len(records) == len({r["url"] for r in records})
