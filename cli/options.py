"""The crawl options every subcommand shares, their help texts, and `config_from()`.

Each option says what it does and its default in `--help`; the README's option table
is the same list.  Sizes take units (`10M`, `512k`); durations are plain seconds.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..core.errors import PatternError, UsageError
from ..core.secrets import has_control
from .exitcodes import EXIT_CODES

if TYPE_CHECKING:
    from ..core.config import CrawlConfig

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")



class Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit 2, without the usage dump. No abbreviations:
    `--prox URL` taken as `--proxy` would slip past the checks that keep secrets off
    command lines and screens (cli/detach.py, tui/top/launch.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"crawltop: error: {message}\n")


def positive(kind: type) -> Callable[[str], object]:
    """A number > 0; a float must be finite: `nan` passes `> 0` tests as False both ways,
    and `--timeout nan` made every fetch fail as if no server answered."""
    def parse(text: str) -> object:
        value = kind(text)
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text}")
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def whole(least: int, most: int | None = None) -> Callable[[str], int]:
    """A whole number from `least` (to `most`): `--max-depth -1` crawled as if 0 had been
    meant, and `--max-redirect -1` followed none, both silently."""
    def parse(text: str) -> int:
        value = int(text)
        if value < least or (most is not None and value > most):
            span = f"{least} or more" if most is None else f"{least} to {most}"
            raise argparse.ArgumentTypeError(f"must be {span}: {text}")
        return value
    parse.__name__ = "int"
    return parse


_NOT_HOST = re.compile(r"[\x00-\x20\x7f/?#@\\]")


def header_value(text: str) -> str:
    """A header's value as given (`--user-agent`): a CR or LF would end the header, and
    aiohttp refused it only at the first request, as if no root could be fetched."""
    if has_control(text):
        raise argparse.ArgumentTypeError("holds a control character (CR, LF, NUL...)")
    return text


def host_name(text: str) -> str:
    """A bare host (`--header-host`): no scheme, path, user or space; compared as written,
    lower-cased, to the hosts of the URLs crawled."""
    host = text.strip()
    if not host or _NOT_HOST.search(host):
        raise argparse.ArgumentTypeError(f"not a host name: {text!r} (e.g. api.example.com)")
    return host


def dns_server(text: str) -> str:
    """`--dns-server ADDR[:PORT]`, checked and written as c-ares takes it."""
    from ..core.fetching.resolver import HAVE_AIODNS, parse_server

    if not HAVE_AIODNS:
        raise argparse.ArgumentTypeError("needs aiodns (pip install aiodns): the system resolver has no such setting")
    try:
        return parse_server(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def size(text: str) -> int:
    """`10M`, `512k`, `1.5G` or plain bytes; binary units (k = 1024)."""
    m = _SIZE.fullmatch(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 512k, 10M): {text}")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds: finite, >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text}") from None
    if not (0 <= value < 1e6):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text}")
    return value


def human_size(n: int) -> str:
    for unit, factor in (("G", 1024**3), ("M", 1024**2), ("k", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


POLITENESS = """\
politeness, per host (or per registered domain with --queue-by domain):
  Each host has its own queue; a worker only takes a URL whose host is due, so one
  slow or delayed host never holds up the others. Between the starts of two requests
  to a host there is at least its delay: the largest of --delay, robots.txt's
  Crawl-delay (up to --max-crawl-delay), --delay-factor x its last response time, and a
  delay set live (t, ctl host delay). robots.txt is the host's first request.
  A 429 or 503 stops the whole host until its Retry-After (seconds or a date, up to
  60 s), else backs it off exponentially; a host that cannot be reached backs off too,
  and a success resets the count. A 500 or a read timeout waits as that URL's own.
  After --host-max-failures failures in a row to reach the host (unreachable or timing
  out) it is retired: each URL still queued for it gets a record (error_kind host-retired).
  A host that gives no HTTP response at all (refused, reset, dropped, no headers in
  time) backs off, gets one request at a time, and counts toward retiring it. Until a
  host first answers (any status) it gets one request at a time, and a host that never
  answered is retired after 2 failures (or --host-max-failures, if lower).

checks and pages (-c, --checks):
  The site's hosts (those in --scope) are fetched by the -c page workers only; other
  hosts (external links, requisites from a CDN) by --checks workers of their own. A
  check mostly waits on a far host, so dead links never hold a worker the site needs:
  the site finishes first and the rot after it. The screen shows "checks busy/N".

what is fetched (README "What is fetched"):
  pages: links (a, area, meta refresh) and frames within --scope, --include and
    --exclude, up to --max-depth; parsed and followed unless the page says nofollow
    (<meta name=robots>, X-Robots-Tag; --no-robots ignores them; rel=nofollow on one
    link is recorded, not obeyed).
  requisites: what a page loads to show itself, from any host, 5 hops deep at most
    (page -> stylesheet -> image); never followed. They ignore --max-depth and
    --include; --exclude, robots.txt, politeness and --max-pages-per-host apply.
    Video and audio are fetched like images, capped by --max-bytes.
  external links: navigation out of scope, checked with one request (redirects
    followed), never followed; an HTML answer is read for its ids (#fragments).
  --max-pages counts URLs of every kind.
"""


def add_crawl_options(p: argparse.ArgumentParser, *, timeout: float | None = None) -> None:
    from ..core.config import CrawlConfig

    d = CrawlConfig(roots=())
    timeout = d.timeout if timeout is None else timeout
    p.epilog = POLITENESS + "\n" + EXIT_CODES
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    add = p.add_argument
    add("-c", "--concurrency", type=positive(int), default=d.concurrency, metavar="N",
        help=f"page workers: the site's own URLs fetched at once; +/- change it live (default {d.concurrency})")
    add("--checks", type=whole(1, 10_000), default=d.checks, metavar="N",
        help="check workers: external links and other hosts' requisites in flight at once, apart from "
             f"-c, so dead links never hold up the site's pages (default {d.checks})")
    add("--max-redirect", type=whole(0), default=d.max_redirect, metavar="N",
        help=f"redirect hops followed from one URL before giving up (default {d.max_redirect})")
    add("--max-tries", type=positive(int), default=d.max_tries, metavar="N",
        help=f"tries per URL on network errors, 429 and 5xx, with backoff (default {d.max_tries})")
    add("--scope", choices=("host", "domain", "any"), default=d.scope,
        help=f"links followed: same host, same registered domain, or anywhere (default {d.scope})")
    add("--include", action="append", default=[], metavar="REGEX",
        help="follow only URLs matching one of these (repeatable; default: all in scope)")
    add("--exclude", action="append", default=[], metavar="REGEX",
        help="never follow URLs matching this (repeatable; default: none)")
    add("--ignore-set", action="append", default=[], metavar="NAME",
        help="also turn on this curated ignore set: mediawiki, forums, blogs (calendars too), social "
             "(repeatable; default: global only)")
    add("--no-ignore-set", action="append", default=[], metavar="NAME",
        help="turn this ignore set off, e.g. global (loops, runaway escapes, reply and share links, "
             "session ids); repeatable (default: none off)")
    add("--max-depth", type=whole(0), default=None, metavar="N",
        help="links followed from a root at most N hops deep (default: no limit)")
    add("--max-pages", type=positive(int), default=None, metavar="N",
        help="stop queueing new URLs after N (default: no limit)")
    add("--timeout", type=positive(float), default=timeout, metavar="SECONDS",
        help=f"connect and per-read timeout; a whole response gets 3x (default {timeout:g})")
    add("--dns-server", type=dns_server, action="append", default=[], dest="dns_servers", metavar="ADDR[:PORT]",
        help="look host names up at this name server, an IP address (port 53 unless given); repeatable "
             "(default: the system's, from /etc/resolv.conf)")
    add("--max-bytes", type=size, default=d.max_bytes, metavar="SIZE",
        help=f"body size cap after decompression, e.g. 512k, 10M (default {human_size(d.max_bytes)})")
    add("--per-host", type=positive(int), default=None, metavar="N",
        help="fetches in flight per host at most (default: no cap beyond -c)")
    add("--delay", type=seconds, default=d.delay, metavar="SECONDS",
        help=f"least gap between the starts of two requests to one host (default {d.delay:g})")
    add("--queue-by", choices=("host", "domain"), default=d.queue_by,
        help="the unit of politeness: each host, or each registered domain (default host)")
    add("--max-crawl-delay", type=seconds, default=d.max_crawl_delay, metavar="SECONDS",
        help=f"robots.txt Crawl-delay is obeyed up to this (default {d.max_crawl_delay:g})")
    add("--delay-factor", type=seconds, default=d.delay_factor, metavar="F",
        help="adaptive delay: F x the host's last response time (default off)")
    add("--host-max-failures", type=positive(int), default=d.host_max_failures, metavar="N",
        help=f"retire a host after N failures in a row: its URLs get records, unfetched; a host that never "
             f"answered at all retires after 2 and is tried one connection at a time (default {d.host_max_failures})")
    add("--max-pages-per-host", type=positive(int), default=None, metavar="N",
        help="queue at most N URLs per host; the rest are counted, not fetched (default: no budget)")
    add("--no-robots", action="store_true",
        help="ignore robots.txt (default: obey it, Crawl-delay included)")
    add("--no-sitemaps", action="store_true",
        help="don't read sitemaps (default: read robots.txt's Sitemap: lines, else /sitemap.xml)")
    add("--no-requisites", action="store_true",
        help="don't fetch page requisites: images, srcset, stylesheets and their url()s, scripts, media, "
             "embeds, off-site frames, from any host (default: fetch them, 5 hops deep at most)")
    add("--no-external", action="store_true",
        help="don't check links out of scope (default: one request each, never followed)")
    add("--no-fragments", action="store_true",
        help="don't check that a link's #fragment names an element of its page (default: check)")
    add("--browser", action="store_true",
        help="load the site's pages in headless Chromium, so pages scripts build are crawled: links from the "
             "final HTML, what each page loaded recorded once; other URLs stay on plain HTTP. Costs about a "
             "tenth of the pages/s and a Chromium's memory (~600 MB). Needs pip install 'crawltop[browser]' "
             "and a Chromium (default: off)")
    add("--browser-path", default=None, metavar="PATH",
        help="the Chromium --browser launches (default: /usr/lib/chromium/chromium, else Playwright's own)")
    add("--page-timeout", type=positive(float), default=d.page_timeout, metavar="SECONDS",
        help=f"with --browser: the hard limit of a page in its tab, loading, network idle, scrolling and "
             f"reading its links included; a page past it is recorded 'browser: page timed out' "
             f"(default {d.page_timeout:g})")
    add("--browser-quiet", type=positive(float), default=d.browser_quiet, metavar="SECONDS",
        help=f"with --browser: a page is idle once none of its requests has been in flight this long (one "
             f"left: at least 2 s, a long poll); it is read then, or at --page-timeout (default {d.browser_quiet:g})")
    add("--browser-restart", type=whole(0), default=d.browser_restart, metavar="PAGES",
        help=f"with --browser: restart the browser after this many pages, 0 never (default {d.browser_restart})")
    add("--browser-memory", type=size, default=d.browser_memory, metavar="SIZE",
        help="with --browser: restart the browser once its processes' memory (PSS) passes this, e.g. 512M "
             f"(default {human_size(d.browser_memory)})")
    add("--user-agent", type=header_value, default=None, metavar="UA",
        help="User-Agent header (default crawltop/VERSION)")
    add("--output", "-o", default=None, metavar="FILE.jsonl",
        help="write one JSON record per URL to this file (default: none)")
    add("--max-time", type=positive(float), default=None, metavar="SECONDS",
        help="stop cleanly after this long, as q does: queued URLs are cancelled, or kept with --state "
             "to resume (default: no limit)")
    add("--headless", action="store_true",
        help="no TUI: progress on stderr, report on stdout (default when stdout is not a TTY)")
    add("--quiet", "-q", action="store_true",
        help="headless without the progress lines on stderr; the report and errors still print (default: off)")
    add("--exit-on-finish", action="store_true",
        help="TUI: close when the crawl ends (default: stay on the summary)")
    add_session_options(p)


def add_session_options(p: argparse.ArgumentParser, *, join: bool = False) -> None:
    """Request headers, proxy, cookies (core/fetching/session.py). Their secrets are never
    stored (core/secrets.py): a resume or a join is given them again. `join` has these
    too, except --header-host: a setting of the crawl, which a join takes from Redis."""
    add = p.add_argument
    add("--header", action="append", default=[], metavar="'NAME: VALUE'",
        help="send this header with every request; repeatable; @FILE reads one per line; an empty value "
             "drops a header; Authorization and Cookie go only to the roots' hosts (or --header-host); "
             "values are never stored (default: none)")
    add("--proxy", default=None, metavar="URL",
        help="send every request through this http:// or https:// proxy, USER:PASSWORD@ allowed; the "
             "password is never stored (default: HTTP_PROXY/HTTPS_PROXY/NO_PROXY from the environment)")
    add("--no-proxy", action="store_true",
        help="ignore HTTP_PROXY, HTTPS_PROXY and NO_PROXY (default: honour them unless --proxy)")
    add("--cookies", default=None, metavar="FILE",
        help="load cookies from this Netscape cookies.txt (curl, wget, browser exports); cookies servers "
             "set are kept and sent back either way (default: start with none)")
    add("--save-cookies", default=None, metavar="FILE",
        help="write the cookie jar to this Netscape cookies.txt when the crawl ends, mode 0600 (default: don't)")
    if not join:
        add("--header-host", type=host_name, action="append", default=[], metavar="HOST",
            help="send --header's Authorization and Cookie to exactly these hosts; repeatable "
                 "(default: the roots' hosts)")


def add_warc(p: argparse.ArgumentParser, *, wacz: bool = True) -> None:
    """`--warc` and its companions, for crawl, demo, resume and join (cli/archive.py builds the sink)."""
    p.add_argument("--warc", metavar="FILE.warc.gz", default=None,
                   help="write WARC 1.1 archives FILE-00000.warc.gz, FILE-00001.warc.gz ... and their CDXJ "
                        "index FILE.cdxj beside them (default: none)")
    p.add_argument("--warc-max-size", metavar="SIZE", default=None, type=_size,
                   help="start the next WARC file once one passes SIZE: 500M, 1G, ... (default: 1G)")
    p.add_argument("--no-dedup", action="store_true",
                   help="write every payload in full; by default a payload already archived is a revisit record")
    p.add_argument("--dedup-from", metavar="FILE", action="append", default=[],
                   help="also deduplicate against an earlier crawl: its .cdxj index or its --state file; "
                        "repeatable (default: this crawl's own archive only)")
    if wacz:
        p.add_argument("--wacz", metavar="FILE.wacz", default=None,
                       help="when the crawl ends, pack the WARCs, index and page list into this WACZ (default: none)")


def _size(text: str) -> int:
    from ..core.output.warc import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_roots(roots: Sequence[str]) -> None:
    """Each root an http(s) URL with a host, checked before the engine is imported: a bare
    host is refused with the URL it probably meant (`did you mean https://example.com/ ?`)."""
    from urllib.parse import urlsplit

    for root in roots:
        try:
            parts = urlsplit(root.strip())
            ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if ok:
            continue
        hint = ""
        if "://" not in root and root.strip() and " " not in root.strip():  # example.com, host:8080/x
            try:
                guess = urlsplit("https://" + root.strip().lstrip("/"))
                guess.port  # noqa: B018  (a bad port raises here, not later)
            except ValueError:
                guess = urlsplit("https://")
            if guess.hostname and ("." in guess.hostname or guess.hostname == "localhost"):
                hint = f" (did you mean {guess.scheme}://{guess.netloc}{guess.path or '/'}" + \
                       (f"?{guess.query}" if guess.query else "") + " ?)"
        raise UsageError(f"not an http(s) URL with a host: {root}{hint}")


def config_from(args: argparse.Namespace, roots: Sequence[str]) -> CrawlConfig:
    from ..core.config import CrawlConfig
    from ..core.queueing.patterns import check

    check_roots(roots)
    for pattern in (*args.include, *args.exclude):
        try:
            check(pattern)  # RE2: linear time; a feature it lacks is refused, never a fallback
        except PatternError as exc:
            raise UsageError(str(exc)) from None
    return CrawlConfig(
        roots=tuple(roots), concurrency=args.concurrency, checks=args.checks, max_redirect=args.max_redirect,
        max_tries=args.max_tries, scope=args.scope, include=tuple(args.include),
        exclude=tuple(args.exclude), max_depth=args.max_depth, max_pages=args.max_pages,
        timeout=args.timeout, dns_servers=tuple(args.dns_servers), max_bytes=args.max_bytes,
        per_host=args.per_host,
        delay=args.delay, robots=not args.no_robots, sitemaps=not args.no_sitemaps, user_agent=args.user_agent,
        requisites=not args.no_requisites, external=not args.no_external, fragments=not args.no_fragments,
        output=args.output,
        queue_by=args.queue_by, max_crawl_delay=args.max_crawl_delay, delay_factor=args.delay_factor,
        host_max_failures=args.host_max_failures, max_pages_per_host=args.max_pages_per_host,
        ignore_sets=ignore_sets(args), max_time=getattr(args, "max_time", None),
        **browser_options(args), **session_options(args),
    )


def browser_options(args: argparse.Namespace) -> dict[str, Any]:
    """--browser checked before anything starts: without Playwright or a Chromium, one line
    saying what to install, exit 2."""
    if not getattr(args, "browser", False):
        # `resume STATE --browser-path PATH` of a --browser crawl: this machine's Chromium
        # (checked when the crawl starts its browser), not the path dropped
        path = getattr(args, "browser_path", None)
        return {"browser_path": os.path.abspath(path)} if path else {}
    # Refused rather than half done: Chromium resolves its tabs' names itself, with the
    # system's resolver, and takes no name server from outside (docs/fetched.md).
    if getattr(args, "dns_servers", None):
        raise UsageError("--browser and --dns-server don't mix: Chromium looks names up with the system's "
                         "resolver, not the crawl's")
    from ..core.fetching.browser import check

    path = getattr(args, "browser_path", None)
    check(path)
    return {"browser": True, "browser_path": os.path.abspath(path) if path else None,
            **{name: getattr(args, name)
               for name in ("page_timeout", "browser_quiet", "browser_restart", "browser_memory")
               if hasattr(args, name)}}


def ignore_sets(args: argparse.Namespace) -> tuple[str, ...]:
    """`global`, plus --ignore-set, minus --no-ignore-set; an unknown name is a usage error."""
    from ..core.steering.ignore_sets import DEFAULT, NAMES, unknown

    on, off = list(getattr(args, "ignore_set", [])), list(getattr(args, "no_ignore_set", []))
    bad = unknown(on + off)
    if bad:
        raise UsageError(f"no ignore set {bad[0]!r}: the sets are {', '.join(NAMES)}")
    return tuple(n for n in dict.fromkeys([*DEFAULT, *on]) if n not in off)


def session_options(args: argparse.Namespace) -> dict[str, Any]:
    """CrawlConfig fields of add_session_options, checked: a bad header, proxy or cookie
    file is a one-line usage error (exit 2) before anything starts."""
    from ..core.fetching import cookies as cookiefile
    from ..core.secrets import parse_headers, split_proxy

    headers = expand_headers(getattr(args, "header", []))
    parse_headers(headers)
    if getattr(args, "proxy", None):
        split_proxy(args.proxy)
    out: dict[str, Any] = {"headers": tuple(headers), "proxy": getattr(args, "proxy", None),
                              "env_proxy": not getattr(args, "no_proxy", False)}
    if hasattr(args, "header_host"):
        out["header_hosts"] = tuple(h.strip().lower().rstrip(".") for h in args.header_host)
    cookies, save = getattr(args, "cookies", None), getattr(args, "save_cookies", None)
    if cookies:
        cookiefile.read(cookies)  # unreadable or not cookies.txt: UsageError
        out["cookies"] = os.path.abspath(cookies)
    if save:
        parent = os.path.dirname(os.path.abspath(save))
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            raise UsageError(f"--save-cookies {save}: cannot write in {parent}")
        out["save_cookies"] = os.path.abspath(save)
    return out


def expand_headers(values: Sequence[str]) -> list[str]:
    """`@FILE` stands for the headers in FILE, one a line (curl's -H @file): a secret
    there stays out of the process list. A file of more than 1 MB (`@/dev/zero`) or not
    UTF-8 is a usage error."""
    from ..core.localfile import MB, read_text

    out: list[str] = []
    for v in values:
        if not v.startswith("@"):
            out.append(v)
            continue
        # newlines as universal newlines read them (splitlines would also cut at \f and \x1c)
        text = read_text(v[1:], "--header", MB).replace("\r\n", "\n").replace("\r", "\n")
        out += [line for line in text.split("\n") if line.strip() and not line.startswith("#")]
    return out
