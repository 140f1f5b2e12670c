"""`crawltop ctl NAME ignore|seed|host ...` against a detached crawl, in real processes:
scripts steer with the same methods as the keys."""
from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from support.ctl import cli, wait_gone, wait_status
from support.ignoresite import start_ignore_site

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
    [rule] = [r for r in map(json.loads, outp.splitlines()) if not r["source"]]  # beside the global set's
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


async def test_ctl_turns_an_ignore_set_on_and_off_live(rundir: Path, tmp_path: Path) -> None:
    """Curated ignore sets from `ctl`: `global` is on by default; `ctl NAME ignore set blogs on` drops the queued
    calendar pages (each its record naming the set) and stops later ones; `ignore list`
    says which set each pattern came from; `--no-ignore-set global` lets the loops in."""
    site = await start_ignore_site()
    try:
        out = tmp_path / "r.jsonl"
        rc, _, err = await cli("crawl", site.url + "/", "--detach", "--name", "is", "-c", "1", "--delay", "0.05",
                               "--no-robots", "--no-sitemaps", "-o", str(out))
        assert rc == 0, err
        s = await wait_status("is", lambda t: t["queued"] > 5)
        rc, outp, err = await cli("ctl", "is", "ignore", "sets")
        sets = {x["name"]: x for x in map(json.loads, outp.splitlines())}
        assert rc == 0 and sets["global"]["on"] and not sets["blogs"]["on"] and sets["blogs"]["patterns"] > 3, err
        rc, outp, err = await cli("ctl", "is", "ignore", "set", "blogs", "on")
        toggled = time.time()  # the set is on: no calendar request may leave after this
        assert rc == 0 and outp.startswith("ignore set blogs on: "), err
        rc, outp, err = await cli("ctl", "is", "ignore", "set", "blogs", "on")
        assert rc == 1 and "already on" in err
        rc, outp, err = await cli("ctl", "is", "ignore", "set", "nope", "on")
        assert rc == 1 and "no ignore set 'nope'" in err
        rc, outp, err = await cli("ctl", "is", "ignore", "list")
        sources = {r["source"] for r in map(json.loads, outp.splitlines())}
        assert rc == 0 and sources == {"global", "blogs"}, outp
        rc, outp, err = await cli("ctl", "is", "ignore", "set", "global", "off")
        assert rc == 0 and outp.strip() == "ignore set global off", err
        rc, outp, err = await cli("ctl", "is", "ignore", "set", "global", "maybe")
        assert rc == 1 and "usage: crawltop ctl NAME ignore" in err
        assert (await cli("ctl", "is", "stop"))[0] == 0
        await wait_gone(s["pid"])
        records = [json.loads(line) for line in out.read_text().splitlines()]
        late = [r["url"] for r in records if r["status"] and "/cal/2026/0" in r["url"]
                and datetime.fromisoformat(r["fetched_at"].replace("Z", "+00:00")).timestamp() > toggled]
        assert not late, late  # none sent after the toggle (by the time it went out, not by its place)
        assert all("(ignore set " in r["error"] for r in records if r["error_kind"] == "ignored")

        # without global, the wiki's relative skin link nests without end
        rc, outp, err = await cli("crawl", site.url + "/", "--headless", "--no-robots", "--no-sitemaps",
                                  "--max-pages", "60", "--no-ignore-set", "global", "-o", str(tmp_path / "n.jsonl"))
        assert rc == 0, err
        urls = [json.loads(line)["url"] for line in (tmp_path / "n.jsonl").read_text().splitlines()]
        assert any(u.endswith("/skins/skins/skins/") for u in urls)
        rc, outp, err = await cli("crawl", site.url + "/", "--headless", "--ignore-set", "nope")
        assert rc == 2 and "no ignore set 'nope'" in err
    finally:
        await site.stop()
