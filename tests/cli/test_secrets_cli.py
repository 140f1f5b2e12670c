"""Secrets never leak: real crawltop processes with --header, --proxy (a real
forward proxy with a password) and --cookies against a real site that demands them;
then the records, the WARC, the state file and Redis are searched for every secret.
A resume and a join without the secrets are refused with what is missing; with them,
they go on (the resumed crawl still has the cookie the server set: the jar kept beside
the state file)."""
from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import stat
import sys
from pathlib import Path

import pytest
import redis
from aiohttp import web
from support.cluster import recorded_by
from support.proxy import Proxy
from support.sites import slow
from support.wait import wait_until

from crawltop.core.cluster.keys import Keys

AUTH = "Bearer tok-S3CRET-auth"
SID = "C00KIE-S3CRET-sid"
SERVER_COOKIE = "SRV-S3CRET-cookie"
PROXY_PW = "pr0xy-S3CRET-pw"
API_KEY = "key-S3CRET-api"  # not a credential header by name: still never stored
SECRETS = (b"tok-S3CRET-auth", SID.encode(), SERVER_COOKIE.encode(), PROXY_PW.encode(), API_KEY.encode())
PAGES = 16

pytestmark = pytest.mark.timeout(240)


def site_routes(delay: float, server_cookie: bool = True) -> dict:
    async def handler(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            raise web.HTTPNotFound()
        ok = request.headers.get("Authorization") == AUTH and request.cookies.get("sid") == SID
        if request.path != "/" and server_cookie:
            ok = ok and request.cookies.get("srv") == SERVER_COOKIE  # set by the root, in the jar
        if not ok:
            return web.Response(status=401, text="log in first")
        return await late(request)

    async def answer(request: web.Request) -> web.Response:
        links = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(PAGES)) if request.path == "/" else ""
        resp = web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")
        if request.path == "/":
            resp.set_cookie("srv", SERVER_COOKIE, path="/")
        return resp

    late = slow(delay, answer)
    return {"/": handler, "/robots.txt": handler, **{f"/p/{i}": handler for i in range(PAGES)}}


async def cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "crawltop.cli", *args, env=env,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def environ(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    return {**env, "CRAWLTOP_RUN_DIR": str(tmp_path / "run"), "XDG_STATE_HOME": str(tmp_path / "xdg")}


def cookie_file(tmp_path: Path) -> str:
    path = tmp_path / "cookies.txt"
    path.write_text(f"127.0.0.1\tFALSE\t/\tFALSE\t0\tsid\t{SID}\n")
    return str(path)


def assert_no_secret(data: bytes, where: str) -> None:
    for s in SECRETS:
        assert s not in data, f"{s!r} leaked into {where}"


async def wait_lines(path: Path, n: int, timeout: float = 90) -> None:
    await wait_until(lambda: path.exists() and len(path.read_text().splitlines()) >= n, timeout,
                     interval=0.05, what=f"{path}: {n} lines")


async def test_state_warc_records_hold_no_secret_and_resume_needs_them(serve, tmp_path) -> None:
    site = await serve(site_routes(0.4))  # ~7 s at -c 1: stopped well before its end
    proxy = await Proxy("crawler", PROXY_PW).start()
    env = environ(tmp_path)
    state, warc, out = tmp_path / "s.db", tmp_path / "a.warc.gz", tmp_path / "r.jsonl"
    headers = tmp_path / "headers.txt"  # @FILE: the token stays off the command line
    headers.write_text(f"Authorization: {AUTH}\nX-Api-Key: {API_KEY}\n")
    secret_args = ["--header", f"@{headers}", "--proxy", f"http://crawler:{PROXY_PW}@127.0.0.1:{proxy.port}"]
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--headless", "-c", "1", "--state",
            str(state), "--warc", str(warc), "-o", str(out), "--cookies", cookie_file(tmp_path), *secret_args,
            env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await wait_lines(out, 4)
        proc.send_signal(signal.SIGTERM)  # a clean stop: the rest stays queued for resume
        b1, b2 = await asyncio.wait_for(proc.communicate(), 120)
        o1, e1 = b1.decode(), b2.decode()
        assert proc.returncode == 0, e1
        first = len(out.read_text().splitlines())
        assert first < PAGES + 1

        code, o2, e2 = await cli("resume", str(state), "--headless", env=env)
        assert code == 2 and "Traceback" not in e2
        assert "--header 'Authorization: ...'" in e2 and "--proxy http://USER:PASSWORD@127.0.0.1" in e2, e2
        assert len(e2.strip().splitlines()) == 1

        code, o3, e3 = await cli("resume", str(state), "--headless", *secret_args, env=env)
        assert code == 0, e3
    finally:
        await proxy.stop()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == PAGES + 1 and {r["status"] for r in records} == {200}, records  # logged in throughout
    assert len(proxy.seen) == sum(site.hits.values()) >= PAGES + 1  # every request went through the proxy
    for path in tmp_path.iterdir():
        if path.name in ("s.db.cookies", "cookies.txt", "headers.txt") or path.is_dir():
            continue
        data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        assert_no_secret(data, path.name)
    warc_text = b"".join(gzip.decompress(p.read_bytes()) for p in sorted(tmp_path.glob("a-*.warc.gz")))
    assert b"Authorization: REDACTED" in warc_text and b"Cookie: REDACTED" in warc_text
    assert b"Set-Cookie: srv=REDACTED" in warc_text and b"X-Api-Key: REDACTED" in warc_text
    for text in (o1, e1, o2, e2, o3, e3):
        assert_no_secret(text.encode(), "the output")
    jar = tmp_path / "s.db.cookies"  # the jar lives beside the state, private
    assert stat.S_IMODE(jar.stat().st_mode) == 0o600 and SERVER_COOKIE in jar.read_text()


async def test_redis_holds_no_secret_and_join_brings_its_own(serve, tmp_path, redis_url) -> None:
    # each process has its own jar (cookies never go to Redis): a cookie the root's
    # process got from the server is not the joiner's, so this site doesn't ask for it
    site = await serve(site_routes(0.6, server_cookie=False))  # ~10 s at -c 1: the joins come mid-crawl
    env = environ(tmp_path)
    secret_args = ["--header", f"Authorization: {AUTH}", "--cookies", cookie_file(tmp_path)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--redis", redis_url, "--name", "sec",
        # --per-host 3: the joiner's workers get the host beside the first process's one,
        # rather than racing it for one slot each time (a loaded machine's joiner loses them all)
        "--headless", "-c", "1", "--per-host", "3", *secret_args, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    r = redis.Redis.from_url(redis_url)
    try:
        def two_records() -> bool:
            assert proc.returncode is None
            return int(r.hget(Keys("sec").count, "records") or 0) >= 2

        await wait_until(two_records, 90, interval=0.1, what="the first process's two records")
        code, _, err = await cli("join", "sec", "--redis", redis_url, "--headless", env=env)
        assert code == 2 and "--header 'Authorization: ...'" in err and "Traceback" not in err, err
        code, _, err = await cli("join", "sec", "--redis", redis_url, "--headless", "-c", "2", *secret_args, env=env)
        assert code == 0, err
        _, e1 = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, e1
        code, _, err = await cli("export", "--redis", redis_url, "sec", "--jsonl", str(tmp_path / "x.jsonl"), env=env)
        assert code == 0, err
        records = [json.loads(x) for x in (tmp_path / "x.jsonl").read_text().splitlines()]
        assert len(records) == PAGES + 1 and {x["status"] for x in records} == {200}, records
        assert len(recorded_by(r, "sec")) == 2  # the joiner fetched pages with its own secrets
        dump = b""
        for key in r.scan_iter(count=1000):
            kind = r.type(key)
            if kind == b"string":
                dump += r.get(key) or b""
            elif kind == b"hash":
                dump += b" ".join(k + b"=" + v for k, v in r.hgetall(key).items())
            elif kind == b"list":
                dump += b" ".join(r.lrange(key, 0, -1))
            elif kind == b"set":
                dump += b" ".join(r.smembers(key))
            elif kind == b"zset":
                dump += b" ".join(r.zrange(key, 0, -1))
            elif kind == b"stream":
                dump += b" ".join(b" ".join(v for v in fields.values()) for _, fields in r.xrange(key))
        assert b"Authorization: REDACTED" in dump  # the settings are there, redacted
        assert_no_secret(dump, "Redis")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        r.close()


async def test_a_detached_crawl_keeps_its_secrets_off_the_process_list_and_logs(serve, tmp_path) -> None:
    site = await serve(site_routes(0.4))
    env = environ(tmp_path)
    out = tmp_path / "d.jsonl"
    code, name, err = await cli("crawl", site.url + "/", "--detach", "--name", "sec", "-c", "1", "-o", str(out),
                                "--header", f"Authorization: {AUTH}", "--cookies", cookie_file(tmp_path), env=env)
    assert code == 0 and name.strip() == "sec", err
    code, status, err = await cli("ctl", "sec", "status", env=env)
    assert code == 0, err
    pid = json.loads(status)["pid"]
    try:
        assert_no_secret(Path(f"/proc/{pid}/cmdline").read_bytes(), "the process list")
        await wait_lines(out, 3)  # the child got the header: the guarded pages answer 200
    finally:
        await cli("ctl", "sec", "stop", env=env)
        await wait_until(lambda: not Path(f"/proc/{pid}").exists(), 60, interval=0.1, what="the crawl's end")
    fetched = [r for r in map(json.loads, out.read_text().splitlines()) if r["error_kind"] != "cancelled"]
    assert len(fetched) >= 3 and {r["status"] for r in fetched} == {200}
    logs = list((tmp_path / "xdg").rglob("*.log"))
    assert logs
    for log in logs:
        assert_no_secret(log.read_bytes(), log.name)


async def test_the_cookie_jar_of_a_state_crawl_survives_kill_9(serve, tmp_path) -> None:
    """The jar beside the state is saved every few seconds while it changes, so a resume
    after kill -9 still sends the cookie the server set in the killed run."""
    site = await serve(site_routes(0.5))
    env = environ(tmp_path)
    state, out, jar = tmp_path / "k.db", tmp_path / "k.jsonl", tmp_path / "k.db.cookies"
    auth = ["--header", f"Authorization: {AUTH}"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--headless", "-c", "1", "--state", str(state),
        "-o", str(out), "--cookies", cookie_file(tmp_path), *auth, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        def saved() -> bool:
            assert proc.returncode is None, "the crawl ended before its jar was saved"
            return jar.exists() and SERVER_COOKIE in jar.read_text()

        await wait_until(saved, 60, interval=0.1, what="the jar saved with the server's cookie")
    finally:
        proc.kill()
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    code, _, err = await cli("resume", str(state), "--headless", *auth, env=env)
    assert code == 0, err
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert {r["url"].removeprefix(site.url) for r in records} == {"/", *(f"/p/{i}" for i in range(PAGES))}
    assert {r["status"] for r in records} == {200}, records
    assert_no_secret(state.read_bytes(), "the state file")


async def test_processes_children_get_the_secrets_without_redis(serve, tmp_path, redis_url) -> None:
    site = await serve(site_routes(0.1, server_cookie=False))
    env = environ(tmp_path)
    code, _, err = await cli("crawl", site.url + "/", "--processes", "2", "--redis", redis_url, "--name", "pp",
                             "--headless", "--header", f"Authorization: {AUTH}", "--cookies", cookie_file(tmp_path),
                             env=env)
    assert code == 0, err
    code, _, err = await cli("export", "--redis", redis_url, "pp", "--jsonl", str(tmp_path / "pp.jsonl"), env=env)
    assert code == 0, err
    records = [json.loads(x) for x in (tmp_path / "pp.jsonl").read_text().splitlines()]
    assert len(records) == PAGES + 1 and {x["status"] for x in records} == {200}, records
    assert_no_secret(err.encode(), "the output")
    for log in (tmp_path / "xdg").rglob("*.log"):  # the children's logs
        assert_no_secret(log.read_bytes(), log.name)
