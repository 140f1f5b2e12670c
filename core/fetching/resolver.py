"""DNS for the crawl: a name is resolved once, and what became of it is kept.

DNS is a fact about a host, not about a URL. aiohttp's default ThreadedResolver runs each
lookup in the loop's default thread pool (6 threads on 2 cores): with external links
checked, link rot means many names that fail, most in a millisecond but some only at the
system resolver's 5 s timeout, and those few hold the threads while every other new
connection waits. Its connector shares a lookup only between requests to the same host and
port at the same moment and keeps no failure, so a dead name was asked again for every URL
and every try.

CrawlResolver wraps one inner resolver (aiohttp's AsyncResolver on aiodns, c-ares: lookups
are datagrams on the loop, no threads; ThreadedResolver when aiodns is missing) and adds:

* one lookup per name in flight, shared by every request that needs it, and shielded: a
  request that is cancelled does not cancel the lookup the others wait for;
* its own time limit per lookup, and a bound on lookups in flight;
* a cache per name: addresses for `ttl` seconds; a name that does not exist (NXDOMAIN, no
  address records, `.invalid`, a malformed name) for the rest of the crawl, NameNotFound at
  once; a lookup that timed out or failed for now (SERVFAIL, REFUSED) gives LookupFailed and
  the name is not asked again before its back-off (doubling per failure) has passed; after
  `max_tries` failures in a row the name counts as not resolving;
* IP literals and `localhost` never reach DNS.

Both errors (core/errors.py) are OSErrors, so aiohttp wraps them in ClientConnectorDNSError;
`errors.name_not_found(exc)` tells the crawler the name is dead for good.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import AsyncResolver, ThreadedResolver

from ..errors import DNSFailure, LookupFailed, NameNotFound, UsageError

try:
    from aiodns import error as ares
except ImportError:  # the project works without it: threads, with the same cache and sharing
    ares = None  # type: ignore[assignment]

HAVE_AIODNS = ares is not None
LOOKUP_LIMIT = 5.0  # seconds, at most (less with a shorter --timeout): the timeout RFC 1123 recommends
TTL = 300.0  # seconds an answer is kept, as the connector's cache kept it (ttl_dns_cache=300)
IN_FLIGHT = 64  # lookups at once on c-ares: datagrams, cheap; the bound keeps a burst of new hosts polite
IN_FLIGHT_THREADS = 4  # on the fallback: fewer than the default pool's 6 threads, which others use too
MAX_BACKOFF = 60.0
MAX_NAMES = 10_000  # answers kept at most
MAX_FAILED = 100_000  # failed names kept at most, each a few words: hostile pages can name endless hosts
_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
NO_ANSWER = "no answer"

# (permanent, why) by c-ares status and by getaddrinfo error: what a failed lookup says.
_ARES: dict[int, tuple[bool, str]] = {} if ares is None else {
    ares.ARES_ENOTFOUND: (True, "NXDOMAIN"),
    ares.ARES_ENODATA: (True, "no address records"),
    ares.ARES_EBADNAME: (True, "not a valid host name"),
    ares.ARES_ESERVFAIL: (False, "SERVFAIL"),
    ares.ARES_EREFUSED: (False, "REFUSED"),
    ares.ARES_ETIMEOUT: (False, NO_ANSWER),
    ares.ARES_ECONNREFUSED: (False, "no name server answered"),
}
_GAI: dict[int, tuple[bool, str]] = {
    socket.EAI_NONAME: (True, "no such name"),
    socket.EAI_AGAIN: (False, "temporary failure"),
    socket.EAI_FAIL: (False, "server failure"),
}
if hasattr(socket, "EAI_NODATA"):  # glibc's; other systems say EAI_NONAME
    _GAI[socket.EAI_NODATA] = (True, "no address records")


class DNSCounts(NamedTuple):
    """What the resolver did, for tests and the status line."""

    lookups: int  # lookups sent (to c-ares or getaddrinfo): one per name, and per try of a failing one
    hits: int  # requests answered from the cache: addresses, or a failure still in force
    shared: int  # requests that joined a lookup already in flight
    in_flight: int  # lookups under way now, or waiting for a slot
    unresolvable: int  # names known not to resolve


@dataclass(slots=True)
class _Failing:
    failures: int  # lookups failed in a row
    until: float  # monotonic time its back-off ends; inf once permanent
    why: str
    permanent: bool


class CrawlResolver(AbstractResolver):
    """The crawl's resolver: one lookup per name, answers and failures kept (the module's
    docstring says why). The connector must not cache on top (use_dns_cache=False): this
    cache is the one the counts and `not_found` describe. Answers are kept per name, not per
    family: a connector always asks for its own one."""

    def __init__(self, inner: AbstractResolver, *, limit: float = LOOKUP_LIMIT, in_flight: int = IN_FLIGHT,
                 max_tries: int = 4, ttl: float = TTL, backoff: float = 0.5, max_backoff: float = MAX_BACKOFF,
                 max_names: int = MAX_NAMES) -> None:
        self.inner = inner
        self.limit, self.max_tries, self.ttl = limit, max_tries, ttl
        self.backoff, self.max_backoff, self.max_names = backoff, max_backoff, max_names
        self._slots = asyncio.Semaphore(in_flight)
        self._ok: dict[str, tuple[float, list[ResolveResult]]] = {}  # name -> (expires, addresses)
        self._bad: dict[str, _Failing] = {}
        self._pending: dict[str, asyncio.Task[list[ResolveResult]]] = {}
        self.lookups = self.hits = self.shared = self.dead = 0

    # -- the public view ------------------------------------------------------------
    def not_found(self, host: str) -> str | None:
        """Why `host` does not resolve ("NXDOMAIN", ...), when that is known for good; else None."""
        bad = self._bad.get(_name(host))
        return bad.why if bad is not None and bad.permanent else None

    def counts(self) -> DNSCounts:
        return DNSCounts(self.lookups, self.hits, self.shared, len(self._pending), self.dead)

    # -- AbstractResolver -------------------------------------------------------------
    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        name = _name(host)
        fixed = _fixed(name, family)
        if fixed is not None:
            return _at(fixed, port)
        now = time.monotonic()
        ok = self._ok.get(name)
        if ok is not None:
            if ok[0] > now:
                self.hits += 1
                return _at(ok[1], port)
            del self._ok[name]
        bad = self._bad.get(name)
        if bad is not None and bad.until > now:
            self.hits += 1
            raise self._error(name, bad, now)
        why = _refused(name)
        if why:
            raise self._failed(name, True, why)
        task = self._pending.get(name)
        if task is None:
            task = asyncio.ensure_future(self._lookup(name, host, family))
            self._pending[name] = task
            task.add_done_callback(partial(self._settled, name))
        else:
            self.shared += 1
        return _at(await asyncio.shield(task), port)

    async def close(self) -> None:
        for task in list(self._pending.values()):
            task.cancel()
        await self.inner.close()

    # -- inside ------------------------------------------------------------------------
    async def _lookup(self, name: str, host: str, family: socket.AddressFamily) -> list[ResolveResult]:
        """One lookup of `name` under the limit; its outcome kept before anyone sees it."""
        async with self._slots:
            self.lookups += 1
            try:
                async with asyncio.timeout(self.limit):
                    addrs = await self.inner.resolve(host, 0, family)
            except TimeoutError:  # before OSError: a TimeoutError is one
                permanent, why = False, NO_ANSWER
            except OSError as exc:
                permanent, why = _classify(exc)
            except ValueError:  # a name the resolver library refuses to encode
                permanent, why = True, "not a valid host name"
            else:
                if addrs:
                    self._keep(name, addrs)
                    return addrs
                permanent, why = True, "no address records"
        if why == NO_ANSWER:  # ours or c-ares's own time-out, which the limit bounds too
            why = f"{NO_ANSWER} within {self.limit:g} s"
        raise self._failed(name, permanent, why)

    def _keep(self, name: str, addrs: list[ResolveResult]) -> None:
        self._bad.pop(name, None)
        if name not in self._ok and len(self._ok) >= self.max_names:
            del self._ok[next(iter(self._ok))]  # the oldest answer: asked again if it is needed again
        self._ok[name] = (time.monotonic() + self.ttl, addrs)

    def _failed(self, name: str, permanent: bool, why: str) -> DNSFailure:
        now = time.monotonic()
        before = self._bad.get(name)
        failures = (before.failures if before is not None else 0) + 1
        if not permanent and failures >= self.max_tries:
            permanent, why = True, f"{failures} lookups failed, the last: {why}"
        wait = float("inf") if permanent else min(self.backoff * 2 ** (failures - 1), self.max_backoff)
        self.dead += permanent
        if before is None and len(self._bad) >= MAX_FAILED:
            del self._bad[next(iter(self._bad))]  # the oldest: asked again, once, if it comes up again
        bad = self._bad[name] = _Failing(failures, now + wait, why, permanent)
        return self._error(name, bad, now)

    @staticmethod
    def _error(name: str, bad: _Failing, now: float) -> DNSFailure:
        """A new exception each time: one raised again and again would pile up tracebacks."""
        if bad.permanent:
            return NameNotFound(name, bad.why)
        return LookupFailed(name, bad.why, max(0.0, bad.until - now))

    def _settled(self, name: str, task: asyncio.Task[list[ResolveResult]]) -> None:
        if self._pending.get(name) is task:
            del self._pending[name]
        if not task.cancelled():
            task.exception()  # retrieved: when every waiter was cancelled, asyncio would log it


def build(servers: Sequence[str] = (), *, timeout: float = 30.0, max_tries: int = 4,
          backoff: float = 0.5) -> CrawlResolver:
    """The crawl's resolver, from --dns-server, --timeout, --max-tries and the back-off base;
    called in the running loop (the inner resolvers need it).

    c-ares gets two tries, the first a third of the limit: it retransmits once within the
    limit (a lost datagram, a recursive resolver still busy) without retrying a SERVFAIL
    many times over; retries across lookups are this module's, with their back-off."""
    limit = min(LOOKUP_LIMIT, timeout)
    if HAVE_AIODNS:
        try:
            named = [parse_server(s) for s in servers] or None  # None: resolv.conf's
        except ValueError as exc:
            raise UsageError(f"--dns-server: {exc}") from None
        inner: AbstractResolver = AsyncResolver(nameservers=named, timeout=limit / 3, tries=2)
        slots = IN_FLIGHT
    elif servers:
        raise UsageError("--dns-server needs aiodns (pip install aiodns): the system resolver has no such setting")
    else:
        inner, slots = ThreadedResolver(), IN_FLIGHT_THREADS
    return CrawlResolver(inner, limit=limit, in_flight=slots, max_tries=max_tries, backoff=backoff)


def parse_server(text: str) -> str:
    """`ADDR[:PORT]` of a name server, in the form c-ares takes (`1.1.1.1:53`, `[::1]:53`).
    An IP address, never a name: the resolver cannot look up its own server. ValueError
    with a one-line message otherwise."""
    raw = text.strip()
    host, port = raw, "53"
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                host = ""
            port = rest[1:]
    elif raw.count(":") == 1:
        host, port = raw.split(":")
    try:
        ip = ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        ip, number = None, 0
    if ip is None or not 0 < number < 65536:
        raise ValueError(f"not ADDR[:PORT] with an IP address (e.g. 1.1.1.1, 127.0.0.1:5353, [::1]:53): {text}")
    return f"[{ip}]:{number}" if ip.version == 6 else f"{ip}:{number}"


def _name(host: str) -> str:
    return host.lower().rstrip(".")


def _fixed(name: str, family: int) -> list[ResolveResult] | None:
    """The addresses of an IP literal, or of localhost (RFC 6761: never asked of DNS)."""
    if name == "localhost" or name.endswith(".localhost"):
        loopback = [("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)]
        return [_result(name, ip, fam) for ip, fam in loopback if family in (socket.AF_UNSPEC, fam)]
    try:
        ip = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
    return [_result(name, str(ip), socket.AF_INET6 if ip.version == 6 else socket.AF_INET)]


def _refused(name: str) -> str:
    """Why no resolver should be asked about `name`, or "": `.invalid` never exists (RFC 6761),
    and glibc refuses a malformed name before it asks; c-ares would send it to the server."""
    if name == "invalid" or name.endswith(".invalid"):
        return "a reserved .invalid name"
    labels = name.split(".")
    if len(name) > 253 or any(not 0 < len(x) < 64 or x[0] == "-" or x[-1] == "-" for x in labels):
        return "not a valid host name"
    return ""


def _classify(exc: OSError) -> tuple[bool, str]:
    """(permanent, why) of a failed lookup: aiohttp's AsyncResolver raises OSError from
    aiodns's DNSError (its status first), ThreadedResolver socket.gaierror."""
    cause = exc.__cause__
    if ares is not None and isinstance(cause, ares.DNSError) and cause.args:
        return _ARES.get(cause.args[0], (False, str(cause.args[-1])))
    if isinstance(exc, socket.gaierror) and exc.errno is not None:
        return _GAI.get(exc.errno, (False, exc.strerror or "lookup failed"))
    if exc.strerror == "DNS lookup failed":  # AsyncResolver: an answer without addresses
        return True, "no address records"
    return False, exc.strerror or str(exc) or type(exc).__name__


def _result(name: str, ip: str, family: int) -> ResolveResult:
    return ResolveResult(hostname=name, host=ip, port=0, family=family, proto=0, flags=_FLAGS)


def _at(addrs: list[ResolveResult], port: int) -> list[ResolveResult]:
    """Answers are kept per name, without a port; each request gets its own."""
    return [ResolveResult(hostname=a["hostname"], host=a["host"], port=port, family=a["family"],
                          proto=a["proto"], flags=a["flags"]) for a in addrs]
