"""Request headers, proxies and cookies (a crawl behind a login or a proxy) against real aiohttp servers and a real
forward proxy on 127.0.0.1, with the real engine. `localhost` plays "another host": the
credential rules go by host name, so it is another host even on the same port."""
from __future__ import annotations

import os
import stat

import pytest
from aiohttp import web
from support.crawl import crawl
from support.proxy import Proxy
from support.sites import page

from crawltop.core.fetching import cookies as cookiefile
from crawltop.core.secrets import REDACTED, redact_pairs

AUTH = "Bearer tok-S3CRET-auth"
SID = "C00KIE-S3CRET-sid"
PROXY_PW = "pr0xy-S3CRET-pw"
ENV_PROXY = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY",
             "all_proxy")


@pytest.fixture(autouse=True)
def _no_env_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_PROXY:
        monkeypatch.delenv(name, raising=False)


def guarded(*hrefs: str, set_cookie: str | None = None, needs_server_cookie: bool = False):
    """A page that answers 401 unless it gets the Authorization header and the sid cookie."""
    async def handler(request: web.Request) -> web.Response:
        ok = request.headers.get("Authorization") == AUTH and request.cookies.get("sid") == SID
        if needs_server_cookie:
            ok = ok and request.cookies.get("srv") == "SERVER-SET-1"
        if not ok:
            return web.Response(status=401, text="who are you")
        resp = page(*hrefs)
        out = await resp(request)
        if set_cookie:
            out.headers["Set-Cookie"] = set_cookie
        return out
    return handler


def cookies_txt(tmp_path, host: str = "127.0.0.1") -> str:
    path = tmp_path / "cookies.txt"
    path.write_text("# Netscape HTTP Cookie File\n"
                    f"{host}\tFALSE\t/\tFALSE\t0\tsid\t{SID}\n"
                    ".example.org\tTRUE\t/\tFALSE\t0\tforeign\tnot-for-us\n"
                    f"{host}\tFALSE\t/\tFALSE\t1000\texpired\tlong-gone\n")
    return str(path)


async def test_headers_and_cookies_reach_the_site_and_never_another_host(serve, tmp_path) -> None:
    elsewhere: list[dict[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        elsewhere.append(dict(request.headers))
        return web.Response(text="<html></html>", content_type="text/html")

    other = await serve({"/landing": record, "/moved-here": record, "/robots.txt": record})
    other_url = other.url.replace("127.0.0.1", "localhost")
    site = await serve({})
    site.routes.update({
        "/": guarded("/next", "/go", f"{other_url}/landing", set_cookie="srv=SERVER-SET-1; Path=/"),
        "/next": guarded(needs_server_cookie=True),
        "/go": guarded(),
    })

    async def go(request: web.Request) -> web.Response:  # a redirect to another host
        return web.Response(status=302, headers={"Location": f"{other_url}/moved-here"})

    site.routes["/go"] = go
    saved = tmp_path / "saved.txt"
    _, sink = await crawl(site.url + "/", scope="any", headers=(f"Authorization: {AUTH}", "X-Team: crawl-ops"),
                          cookies=cookies_txt(tmp_path), save_cookies=str(saved))
    rec = {r.url: r for r in sink.records}
    assert rec[site.url + "/"].status == 200
    assert rec[site.url + "/next"].status == 200  # the cookie the server set was sent back
    assert rec[site.url + "/go"].next_url == f"{other_url}/moved-here"
    assert {rec[f"{other_url}/landing"].status, rec[f"{other_url}/moved-here"].status} == {200}
    assert len(elsewhere) == 3  # robots.txt, the link, the redirect target
    for headers in elsewhere:
        assert "Authorization" not in headers and "Cookie" not in headers, headers
        assert headers["X-Team"] == "crawl-ops"  # an ordinary header goes everywhere
    text = saved.read_text()
    assert f"\tsid\t{SID}" in text and "\tsrv\tSERVER-SET-1" in text and "long-gone" not in text
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
    assert cookiefile.read(str(saved))  # what we write, we read (curl's format)


async def test_header_host_names_the_hosts_exactly(serve, tmp_path) -> None:
    site = await serve({"/": guarded()})
    _, sink = await crawl(site.url + "/", headers=(f"Authorization: {AUTH}",), header_hosts=("localhost",),
                          cookies=cookies_txt(tmp_path))
    assert sink.records[0].status == 401  # 127.0.0.1 is not named
    local = site.url.replace("127.0.0.1", "localhost")
    _, sink = await crawl(local + "/", headers=(f"Authorization: {AUTH}",), header_hosts=("LOCALHOST",),
                          cookies=cookies_txt(tmp_path, "localhost"))
    assert sink.records[0].status == 200


async def test_a_given_header_replaces_ours_and_an_empty_one_drops_it(serve) -> None:
    got: list[dict[str, str]] = []

    async def echo(request: web.Request) -> web.Response:
        got.append(dict(request.headers))
        return web.Response(text="<html></html>", content_type="text/html")

    site = await serve({"/": echo})
    await crawl(site.url + "/", robots=False, headers=("User-Agent: MyBot/1.0", "Accept-Encoding:"))
    assert got[0]["User-Agent"] == "MyBot/1.0" and "Accept-Encoding" not in got[0]


async def test_every_request_goes_through_the_proxy_with_its_password(serve) -> None:
    site = await serve({"/": page("/a"), "/a": page()})
    proxy = await Proxy("u", PROXY_PW).start()
    try:
        crawler, sink = await crawl(site.url + "/", sitemaps=True, proxy=f"http://u:{PROXY_PW}@127.0.0.1:{proxy.port}")
        assert sorted(r.url for r in sink.records) == [site.url + "/", site.url + "/a"]
        assert all(r.status == 200 for r in sink.records)
        through = sorted(u.removeprefix(site.url) for u, _ in proxy.seen)
        assert through == sorted(p for p, n in site.hits.items() for _ in range(n))
        assert {"/robots.txt", "/sitemap.xml", "/", "/a"} <= set(through)  # side requests too

        # a wrong password: the proxy's 407 is the answer, and the password is nowhere
        _, sink = await crawl(site.url + "/", proxy=f"http://u:wrong-pass@127.0.0.1:{proxy.port}")
        assert [r.status for r in sink.records] == [407]
        assert proxy.refused >= 2  # robots.txt and the page
    finally:
        await proxy.stop()


async def test_env_proxy_no_proxy_and_no_proxy_option(serve, monkeypatch) -> None:
    site = await serve({"/": page("/a"), "/a": page()})
    proxy = await Proxy().start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        _, sink = await crawl(site.url + "/", env_proxy=True)
        assert len(sink.records) == 2 and {u for u, _ in proxy.seen} >= {site.url + "/", site.url + "/a"}

        n = len(proxy.seen)
        _, sink = await crawl(site.url + "/", env_proxy=False)  # --no-proxy
        assert len(sink.records) == 2 and len(proxy.seen) == n

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        _, sink = await crawl(site.url + "/", env_proxy=True)
        assert len(sink.records) == 2 and len(proxy.seen) == n  # bypassed

        monkeypatch.setenv("NO_PROXY", "example.org")
        _, sink = await crawl(site.url + "/", env_proxy=True, proxy=None)
        assert len(proxy.seen) > n
    finally:
        await proxy.stop()


def test_redact_pairs() -> None:
    pairs = [("Host", "x"), ("Authorization", AUTH), ("cookie", "a=b"), ("Set-Cookie", "sid=abc; Path=/; HttpOnly"),
             ("X-Api-Key", "k-123456")]
    out = dict(redact_pairs(pairs, ["x-api-key"]))
    assert out == {"Host": "x", "Authorization": REDACTED, "cookie": REDACTED,
                   "Set-Cookie": f"sid={REDACTED}; Path=/; HttpOnly", "X-Api-Key": REDACTED}


def test_a_proxy_password_is_scrubbed_from_record_errors() -> None:
    from crawltop.core.output.records import Record
    from crawltop.core.secrets import split_proxy

    split_proxy(f"http://u:{PROXY_PW}@127.0.0.1:9")  # parsing a proxy remembers its secret
    record = Record(url="http://x/")
    record.fail(OSError(f"could not reach http://u:{PROXY_PW}@127.0.0.1:9"))
    assert PROXY_PW not in (record.error or "") and REDACTED in (record.error or "")


async def test_https_through_the_proxy_is_tunnelled_with_its_password(serve, tmp_path) -> None:
    """A real TLS site (a certificate made here, trusted through SSL_CERT_FILE) reached
    through the proxy with CONNECT; the CLI in a child process, as a user runs it."""
    import asyncio
    import shutil
    import ssl
    import subprocess
    import sys

    if shutil.which("openssl") is None:  # in CI a failure (.ci/run installs it), never a silent skip
        (pytest.fail if os.environ.get("CI") else pytest.skip)("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    got: list[str | None] = []

    async def root(request: web.Request) -> web.Response:
        got.append(request.headers.get("Authorization"))
        return web.Response(text='<html><a href="/a">a</a></html>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", root)
    app.router.add_get("/a", root)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tls = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await tls.start()
    port = tls._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    proxy = await Proxy("u", PROXY_PW).start()
    out = tmp_path / "r.jsonl"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(SSL_CERT_FILE=str(cert), CRAWLTOP_RUN_DIR=str(tmp_path / "run"))
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", f"https://127.0.0.1:{port}/", "--headless", "-o", str(out),
            "--proxy", f"http://u:{PROXY_PW}@127.0.0.1:{proxy.port}", "--header", f"Authorization: {AUTH}",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err
    finally:
        await proxy.stop()
        await runner.cleanup()
    import json

    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["url"] for r in records) == [f"https://127.0.0.1:{port}/", f"https://127.0.0.1:{port}/a"]
    assert {r["status"] for r in records} == {200}, records
    assert got == [AUTH, AUTH]  # end to end inside the tunnel
    assert proxy.seen and {t for t, _ in proxy.seen} == {f"127.0.0.1:{port}"}  # only CONNECTs
    assert proxy.refused == 0


@pytest.mark.parametrize("args, says", [
    (["--header", "Authorization Bearer tok-S3CRET-auth"], "no ':' in it"),
    (["--header", "Bad Name: x"], "is not a header name"),
    (["--header", "X-Evil: a\r\nInjected: b"], "control character"),
    (["--header", "@/nonexistent/headers.txt"], "No such file"),
    (["--proxy", "ftp://proxy:21"], "--proxy wants http://"),
    (["--proxy", "http://u:p@host:99999"], "bad --proxy URL"),
    (["--cookies", "/nonexistent/cookies.txt"], "No such file"),
    (["--cookies", "BADFILE"], "not a Netscape cookies.txt line"),
    (["--save-cookies", "/nonexistent/dir/out.txt"], "cannot write"),
])
def test_bad_header_proxy_or_cookie_file_is_one_line_and_exit_2(args, says, tmp_path, capsys, monkeypatch) -> None:
    from crawltop.cli.main import main

    monkeypatch.setenv("CRAWLTOP_RUN_DIR", str(tmp_path / "run"))
    bad = tmp_path / "bad.txt"
    bad.write_text("127.0.0.1\tFALSE\t/\n")  # 3 fields, not 7
    args = [str(bad) if a == "BADFILE" else a for a in args]
    assert main(["crawl", "http://127.0.0.1:9/", "--headless", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "S3CRET" not in err  # a malformed header is not echoed: it may hold a token
