"""Crawl settings, keyword-only, with the defaults the CLI documents."""
from dataclasses import dataclass
from typing import Literal

Scope = Literal["host", "domain", "any"]
QueueBy = Literal["host", "domain"]


@dataclass(frozen=True, kw_only=True)
class CrawlConfig:
    roots: tuple[str, ...]
    concurrency: int = 10
    # Workers of their own for checks (external links, requisites of other hosts): a check
    # mostly waits on a far host, and a site's pages must never wait behind link rot.
    checks: int = 32
    max_redirect: int = 10
    max_tries: int = 4
    scope: Scope = "host"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int | None = None
    max_pages: int | None = None
    timeout: float = 30.0
    # Name servers for every lookup, "ADDR:PORT" (--dns-server; core/fetching/resolver.py
    # parse_server); none: the system's, from /etc/resolv.conf.
    dns_servers: tuple[str, ...] = ()
    max_bytes: int = 10 * 1024 * 1024
    per_host: int | None = None
    delay: float = 0.0
    robots: bool = True
    # Read sitemaps (robots.txt's Sitemap: lines, else /sitemap.xml): core/fetching/sitemaps.py.
    # The CLI turns them on unless --no-sitemaps; off here, so an embedded Crawler (and
    # every test of something else) fetches only the URLs it is given and finds.
    sitemaps: bool = False
    # Whole pages (core/queueing/kinds.py): requisites from any host, navigation links out of
    # scope checked once, fragment links checked. The CLI turns each on unless --no-requisites,
    # --no-external, --no-fragments; off here, as sitemaps are, for an embedded Crawler.
    requisites: bool = False
    external: bool = False
    fragments: bool = False
    user_agent: str | None = None
    output: str | None = None
    # Backoff base in seconds: try n waits base * 2**(n-1) * jitter. Tests shrink it.
    backoff: float = 0.5
    # Longest Retry-After / Crawl-delay we agree to wait: a hostile server can't park us.
    max_wait: float = 60.0
    # Start with workers paused (a resumed crawl that was quit while paused).
    start_paused: bool = False
    # Stop cleanly (as `q`: in flight put back, the rest cancelled) after this many seconds of
    # crawling; with a state file the crawl resumes from there (--max-time; None: no limit).
    max_time: float | None = None
    # Scheduling by host (core/queueing/hosts.py): the politeness key, the cap on robots.txt
    # Crawl-delay, the adaptive delay (factor x last response time; 0: off), retirement
    # after N host failures in a row, and a budget of URLs per host (None: no budget).
    queue_by: QueueBy = "host"
    max_crawl_delay: float = 30.0
    delay_factor: float = 0.0
    host_max_failures: int = 5
    max_pages_per_host: int | None = None
    # -- what a real site needs (core/fetching/session.py; secrets: core/secrets.py) --
    # `Name: value` request headers; Authorization/Cookie/Proxy-Authorization go only to
    # the roots' hosts, or to `header_hosts` when given. Values are secrets: stored redacted.
    headers: tuple[str, ...] = ()
    header_hosts: tuple[str, ...] = ()
    # http(s)://[user:password@]host:port for every request; credentials stored redacted.
    proxy: str | None = None
    # Honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY. The CLI turns it on unless --no-proxy;
    # off here, so an embedded Crawler (and every test) ignores the environment.
    env_proxy: bool = False
    # A Netscape cookies.txt to load, one to write the jar to at the end, and the jar kept
    # beside a --state file (set by the CLI, 0600; never inside the state file itself).
    cookies: str | None = None
    save_cookies: str | None = None
    cookie_jar: str | None = None
    # -- curated ignore sets (core/steering/ignore_sets.py) on at the start. The CLI
    # turns `global` on unless --no-ignore-set global; none here, so an embedded Crawler (and
    # every engine test) sees exactly the ignores it is given.
    ignore_sets: tuple[str, ...] = ()
    # --browser: the site's pages loaded in headless Chromium through Playwright (the extra
    # crawltop[browser]; core/fetching/browser.py), everything else on aiohttp. browser_path:
    # the Chromium to launch (None: Debian's /usr/lib/chromium/chromium, else Playwright's own).
    browser: bool = False
    browser_path: str | None = None
    # A page's one hard limit in its tab (seconds); the network's quiet time that makes a page
    # idle (about 2 s; tests shorten it); a restart after this many pages (0: never) and when
    # the browser's processes' PSS passes browser_memory bytes (0: never).
    page_timeout: float = 30.0
    browser_quiet: float = 2.0
    browser_restart: int = 100
    browser_memory: int = 1 << 30
