"""The crawl's one aiohttp ClientSession: User-Agent, `--header`, proxy, cookie jar, and its
resolver (core/fetching/resolver.py: each host name looked up once, `--dns-server`).

Every request of a crawl (pages, robots.txt, sitemaps, probes) goes through it, so its rules
for credentials, proxies and cookies hold for all of them: CrawlSession's docstring.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import urllib.request
import warnings
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import aiohttp
from aiohttp import BasicAuth, ClientRequest
from multidict import CIMultiDict
from yarl import URL

from ..config import CrawlConfig
from ..errors import UsageError
from ..secrets import CREDENTIALS, parse_headers, split_proxy
from . import cookies as cookiefile
from . import resolver as dns
from .steps import StepConnector, StepRequest

SAVE_EVERY = 5.0  # seconds between saves of a --state crawl's cookie jar, when it changed
ProxyFor = Callable[[URL], tuple[URL | None, BasicAuth | None]]


def host_key(host: str | None) -> str:
    return (host or "").lower().rstrip(".")


class CrawlSession:
    """Builds the session from a CrawlConfig and keeps its cookie jar on disk.

    - **Headers.** `--header` values are the session's default headers, except credentials
      (Authorization, Cookie, Proxy-Authorization). Those are added per request by
      `CrawlRequest.update_headers`, and only when the request's host is one of the roots'
      hosts (or of `--header-host`, which then names the hosts exactly). It runs for every
      request aiohttp builds, redirect hops included, so a link or a redirect to another host
      never carries them: the browser's rule, and curl's without `--location-trusted`.
      An empty value (`--header 'Accept-Encoding:'`) removes that header, as in curl.
    - **Proxy.** `--proxy` for every request (its user:password as Proxy-Authorization).
      Without it, with `env_proxy`, HTTP_PROXY / HTTPS_PROXY / NO_PROXY are read the way
      urllib (and curl, wget) read them, per request URL. aiohttp's own `trust_env` is not
      used: it would also send ~/.netrc passwords, which nobody asked for.
    - **Cookies.** A real jar (cookies from IP hosts too), loaded from `--cookies` and from
      the jar kept beside a `--state` file, written back to both when the crawl ends and, for
      the state's jar, every few seconds while it runs (a kill -9 loses at most those seconds
      of cookie changes).
    """

    def __init__(self, config: CrawlConfig, agent: str, roots: Sequence[str]) -> None:
        self.config = config
        pairs = parse_headers(config.headers)
        self.header_names = {n.lower() for n, _ in pairs}  # for archives: values never stored
        self.defaults: CIMultiDict[str] = CIMultiDict({"User-Agent": agent})
        self.skip: set[str] = set()
        self.credentials: list[tuple[str, str]] = []
        for name in dict.fromkeys(n.lower() for n, _ in pairs):  # a given header replaces ours
            self.defaults.popall(name, None)
        for name, value in pairs:
            if not value:
                self.skip.add(name)
            elif name.lower() in CREDENTIALS:
                self.credentials.append((name, value))
            else:
                self.defaults.add(name, value)
        hosts = config.header_hosts or [urlsplit(r).hostname or "" for r in roots]
        self.credential_hosts = frozenset(host_key(h) for h in hosts)
        self.proxy: URL | None = None
        self.proxy_auth: BasicAuth | None = None
        if config.proxy:
            bare, user, password = split_proxy(config.proxy)
            self.proxy = URL(bare)
            if user is not None or password is not None:
                self.proxy_auth = _basic(user, password)
        self.env_proxy = _env_proxies() if config.env_proxy and not config.proxy else None
        self.jar = cookiefile.new_jar()
        self._saved = ""
        self._saver: asyncio.Task[None] | None = None
        self.session: aiohttp.ClientSession | None = None
        self.resolver: dns.CrawlResolver | None = None  # made by open(): it needs the running loop

    def load_cookies(self) -> None:
        """--cookies, then the jar a --state crawl kept (newer, so it wins)."""
        if self.config.cookies:
            cookiefile.load(self.jar, self.config.cookies)
        if self.config.cookie_jar and os.path.exists(self.config.cookie_jar):
            cookiefile.load(self.jar, self.config.cookie_jar)
        self._saved = self._text()

    def open(self, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
        self.load_cookies()
        with warnings.catch_warnings():  # proxy_auth: see _basic()
            warnings.simplefilter("ignore", DeprecationWarning)
            self.session = self._session(timeout)
        if self.config.cookie_jar:
            self._saver = asyncio.get_running_loop().create_task(self._autosave())
        return self.session

    def _session(self, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
        config = self.config
        self.resolver = dns.build(config.dns_servers, timeout=config.timeout, max_tries=config.max_tries,
                                  backoff=config.backoff)
        return aiohttp.ClientSession(
            timeout=timeout,
            # The resolver keeps answers and failures per name; a connector cache on top would
            # answer some requests itself, unseen by the resolver's counts.
            connector=StepConnector(limit=0, use_dns_cache=False, resolver=self.resolver),
            headers=self.defaults,
            skip_auto_headers=self.skip or None,
            cookie_jar=self.jar,
            proxy=self.proxy,
            proxy_auth=self.proxy_auth,
            request_class=_request_class(self.credentials, self.credential_hosts, self.env_proxy),
            trust_env=False,
        )

    async def close(self) -> None:
        if self._saver is not None:
            self._saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._saver
        try:
            self.save_cookies(force=True)
        finally:
            if self.session is not None:
                await self.session.close()
            if self.resolver is not None:  # the connector closes only a resolver it made itself
                await self.resolver.close()

    def save_cookies(self, *, force: bool = False) -> None:
        lines = list(cookiefile.lines(self.jar))
        if force or "\n".join(lines) != self._saved:
            self._write(lines)

    def _write(self, lines: list[str]) -> None:
        if self.config.save_cookies:
            cookiefile.write(lines, self.config.save_cookies)
        jar = self.config.cookie_jar
        if jar and (lines or os.path.exists(jar)):  # no empty jar file beside every state file
            cookiefile.write(lines, jar)
        self._saved = "\n".join(lines)

    def _text(self) -> str:
        return "\n".join(cookiefile.lines(self.jar))

    async def _autosave(self) -> None:
        """The jar is read here, on the loop (workers change it); written in a thread."""
        while True:
            await asyncio.sleep(SAVE_EVERY)
            lines = list(cookiefile.lines(self.jar))
            if "\n".join(lines) != self._saved:
                try:
                    await asyncio.to_thread(self._write, lines)
                except OSError:
                    pass  # a full disk: the final save at the end says so


def _basic(user: str | None, password: str | None) -> BasicAuth:
    """aiohttp 3.14 deprecates BasicAuth for proxies in favour of proxy_headers, but sends
    a Proxy-Authorization from proxy_headers only on CONNECT (https), not with a plain
    http request through the proxy; BasicAuth still covers both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return BasicAuth(user or "", password or "")


def _env_proxies() -> ProxyFor | None:
    """HTTP_PROXY / HTTPS_PROXY / NO_PROXY (and their lower-case forms), read once."""
    proxies = urllib.request.getproxies_environment()
    table: dict[str, tuple[URL, BasicAuth | None]] = {}
    for scheme in ("http", "https"):
        raw = proxies.get(scheme)
        if not raw:
            continue
        if "://" not in raw:
            raw = "http://" + raw  # curl's reading of HTTP_PROXY=host:port
        try:
            bare, user, password = split_proxy(raw)
        except UsageError:
            raise UsageError(f"{scheme.upper()}_PROXY in the environment is not an http(s) proxy URL; "
                             "fix it or pass --no-proxy") from None
        auth = _basic(user, password) if user is not None or password is not None else None
        table[scheme] = (URL(bare), auth)
    if not table:
        return None

    def proxy_for(url: URL) -> tuple[URL | None, BasicAuth | None]:
        entry = table.get(url.scheme)
        bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # public, not in typeshed
        if entry is None or bypass(url.host_port_subcomponent or "", proxies):
            return None, None
        return entry

    return proxy_for


def _request_class(credentials: list[tuple[str, str]], hosts: frozenset[str],
                   env_proxy: ProxyFor | None) -> type[ClientRequest]:
    """A ClientRequest that adds credentials for allowed hosts and picks the env proxy:
    aiohttp builds one per request and per redirect hop, so no hop escapes the rules."""
    if not credentials and env_proxy is None:
        return StepRequest
    cookie = "; ".join(v for n, v in credentials if n.lower() == "cookie")
    others = [(n, v) for n, v in credentials if n.lower() != "cookie"]

    class CrawlRequest(StepRequest):
        def update_headers(self, headers) -> None:
            super().update_headers(headers)
            if credentials and host_key(self.url.host) in hosts:
                for name, value in others:
                    self.headers[name] = value
                if cookie:  # merged with the jar's cookies by update_cookies, which runs next
                    self.headers["Cookie"] = cookie

        def update_proxy(self, proxy, proxy_auth, proxy_headers) -> None:
            if proxy is None and env_proxy is not None:
                proxy, proxy_auth = env_proxy(self.url)
            super().update_proxy(proxy, proxy_auth, proxy_headers)

    return CrawlRequest
