"""Every failure crawltop names itself, in one place (httpx-style), and the closed set
of `error_kind` codes records carry.

* CrawlError - the crawler's own conditions; `kind` is a failed record's error_kind
  + UsageError - bad command-line input: exit code 2
    - RuntimeDirError - the run directory or a socket in it is unsafe
  + RedirectError
    - MissingLocation
    - TooManyRedirects
  + BlockedByRobots
  + HTTPStatusError
  + Cancelled
  + HostRetired
  + Ignored
  + SitemapError
  + DNSFailure (also an OSError, so aiohttp wraps it in ClientConnectorDNSError)
    - NameNotFound - the name does not resolve, for the rest of the crawl
    - LookupFailed - a lookup that failed for now (timeout, SERVFAIL), in back-off
* StateError - a state file that cannot be used: exit code 2
* ReportError - a report's source cannot be read: exit code 2
* PatternError (a ValueError) - a pattern RE2 cannot compile
* ProtocolError - a control-socket message that breaks the protocol
* RemoteError - a crawl in another process answered with an error, or not at all
* CrawlLost - a crawl in another process went away without ending its crawl

Control-flow exceptions stay beside their users and never escape the engine:
core/fetching/attempt.py `Retry` (a try to repeat, caught by the worker pool),
core/processing.py `KeptOnCancel` and core/cluster/frontier.py `_Again`.
Network failures keep aiohttp's / asyncio's class names in a record's `error`; beside it
every failed record has a stable `error_kind` from KINDS (see the comment there).
"""
from __future__ import annotations

# The closed set of error_kind values. Nothing else is ever written to a record.
# Network failures keep aiohttp's / asyncio's own class names in a record's human `error`
# ("ClientConnectorError: ..."); `error_kind` is a short stable code to group, count and
# script on, which never changes with the wording of a message or the version of aiohttp.
KINDS: dict[str, str] = {
    "dns": "the host name did not resolve",
    "connect": "no TCP connection (refused, unreachable)",
    "timeout": "no response, or no more of the body, within --timeout",
    "reset": "the server closed or reset the connection mid-exchange",
    "tls": "TLS handshake or certificate failure",
    "truncated": "the body ended before its announced length (a broken transfer)",
    "http-status": "429 or 5xx still failing after --max-tries",
    "too-many-redirects": "a redirect chain longer than --max-redirect",
    "missing-location": "a 3xx without a usable Location header",
    "robots": "robots.txt disallows the URL for our user agent",
    "ignored": "an ignore rule matched the URL",
    "cancelled": "the crawl stopped before the URL was fetched",
    "host-retired": "its host failed --host-max-failures times in a row and was retired",
    "bad-url": "a URL that cannot be requested",
    "bad-sitemap": "a sitemap that is not XML or text, is malformed, too large or nested too deep",
    "other": "anything else (a bug or a surprise; the error text says what)",
}


class CrawlError(Exception):
    """Base of the crawler's own error conditions."""

    kind = "other"


class UsageError(CrawlError):
    """Bad command-line input: exit code 2 with a one-line message."""


class RedirectError(CrawlError):
    """A redirect response we could not follow."""


class MissingLocation(RedirectError):
    """3xx without a usable Location header."""

    kind = "missing-location"


class TooManyRedirects(RedirectError):
    """The chain was longer than --max-redirect."""

    kind = "too-many-redirects"


class BlockedByRobots(CrawlError):
    """robots.txt disallows this URL for our user agent."""

    kind = "robots"


class HTTPStatusError(CrawlError):
    """A retryable status (429, 5xx) that was still failing after --max-tries."""

    kind = "http-status"


class Cancelled(CrawlError):
    """The URL was in flight or queued when the crawl stopped."""

    kind = "cancelled"


class HostRetired(CrawlError):
    """The URL's host was retired after failures in a row: the URL was never fetched."""

    kind = "host-retired"


class Ignored(CrawlError):
    """The URL matched an ignore pattern while queued (the message is the pattern)."""

    kind = "ignored"


class SitemapError(CrawlError):
    """A sitemap we could not read whole: not XML or text, malformed, too big, too deep."""

    kind = "bad-sitemap"


class DNSFailure(CrawlError, OSError):
    """A host name the crawl's resolver (core/fetching/resolver.py) could not turn into
    addresses. An OSError because aiohttp wraps only those in ClientConnectorDNSError (the
    original kept as its `os_error` and `__cause__`); any other class would escape a fetch
    unwrapped. A TimeoutError would escape too, so a lookup's timeout is a LookupFailed."""

    kind = "dns"

    def __init__(self, host: str, why: str, text: str) -> None:
        OSError.__init__(self, None, text)  # (errno, strerror): aiohttp's message shows strerror
        self.host, self.why = host, why

    def __str__(self) -> str:
        return self.strerror or ""

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.host, self.why)


class NameNotFound(DNSFailure):
    """The name does not resolve and is taken not to for the rest of the crawl: NXDOMAIN, no
    address records, a name no resolver would ask about, or --max-tries failed lookups in a
    row. Every later request to the host gets one at once, without another query."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(host, why, f"name does not resolve: {host} ({why})")


class LookupFailed(DNSFailure):
    """A lookup that failed for now: no answer in its time limit, SERVFAIL, REFUSED. The
    name is not asked again before `retry_in` seconds (its back-off) have passed."""

    def __init__(self, host: str, why: str, retry_in: float = 0.0) -> None:
        super().__init__(host, why, f"DNS lookup failed: {host} ({why}; asked again after {retry_in:.3g} s)")
        self.retry_in = retry_in

    def __reduce__(self) -> tuple[object, ...]:
        return type(self), (self.host, self.why, self.retry_in)


class RuntimeDirError(UsageError):
    """The run directory or a socket in it is not safe to use."""


# -- failures outside a crawl's records ------------------------------------------


class StateError(Exception):
    """The state file cannot be used: corrupt, not ours, another version, or busy.

    The file is left untouched.  The CLI maps this to exit code 2.
    """


class ReportError(Exception):
    """The source cannot be read: missing, not records, corrupt. The CLI exits 2."""


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message is one line, fit for a prompt or exit 2."""


class ProtocolError(Exception):
    """A message that breaks the protocol; its text is the one-line error reply."""


class RemoteError(Exception):
    """The crawl answered a request with an error, or could not be reached."""


class CrawlLost(Exception):
    """The crawl's process went away without ending its crawl (killed, crashed)."""


# Network exceptions by class name (aiohttp's and asyncio's), most specific first:
# matched against the exception's MRO, so core/errors.py needs no aiohttp import.
_NETWORK_KINDS: tuple[tuple[str, str], ...] = (
    ("ClientConnectorDNSError", "dns"),
    ("gaierror", "dns"),
    ("ClientSSLError", "tls"),
    ("SSLError", "tls"),
    ("ServerFingerprintMismatch", "tls"),
    ("TimeoutError", "timeout"),
    ("ServerTimeoutError", "timeout"),
    ("ClientPayloadError", "truncated"),
    ("ContentLengthError", "truncated"),
    ("InvalidURL", "bad-url"),
    ("NonHttpUrlClientError", "bad-url"),
    ("ClientConnectorError", "connect"),
    ("ConnectionRefusedError", "connect"),
    ("ServerDisconnectedError", "reset"),
    ("ConnectionResetError", "reset"),
    ("ClientConnectionResetError", "reset"),
    ("BrokenPipeError", "reset"),
    ("ClientOSError", "connect"),
    ("ServerConnectionError", "reset"),
)


def error_kind(exc: BaseException) -> str:
    """The KINDS code of an exception: the crawler's own, or a network one by class."""
    if isinstance(exc, CrawlError):
        return exc.kind
    names = {c.__name__ for c in type(exc).__mro__}
    for name, kind in _NETWORK_KINDS:
        if name in names:
            return kind
    return "other"


def dns_failure(exc: BaseException) -> DNSFailure | None:
    """The resolver's NameNotFound or LookupFailed behind an exception from `session.get(...)`,
    or None. aiohttp raises ClientConnectorDNSError with the resolver's exception as `os_error`
    (and `__cause__`); followed by attribute, so this module needs no aiohttp import."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle (a cause that is its own context) must end
        if seen is None or isinstance(seen, DNSFailure):
            return seen
        seen = getattr(seen, "os_error", None) or seen.__cause__ or seen.__context__
    return None


def unresolvable(exc: BaseException) -> NameNotFound | None:
    """The NameNotFound behind an exception from `session.get(...)`: the host's name is dead
    for the rest of the crawl (its `host` and `why`). None for anything else."""
    found = dns_failure(exc)
    return found if isinstance(found, NameNotFound) else None


def name_not_found(exc: BaseException) -> bool:
    """True when the request failed because its host's name does not resolve, for good:
    the crawler can fail the URL (and the host's other URLs) without retrying."""
    return unresolvable(exc) is not None


def describe(exc: BaseException) -> str:
    """'ClassName: message', the form records and the UI show."""
    msg = str(exc).strip()
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def kind_of(error: str) -> str:
    """The error's kind is its class name, the part before the first colon."""
    return error.split(":", 1)[0]
