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
* StateError - a state file that cannot be used: exit code 2
* ReportError - a report's source cannot be read: exit code 2
* PatternError (a ValueError) - a pattern RE2 cannot compile
* ProtocolError - a control-socket message that breaks the protocol
* RemoteError - a crawl in another process answered with an error, or not at all
* CrawlLost - a crawl in another process went away without ending its crawl

Private control-flow exceptions stay beside their one user and never escape it:
core/crawler.py `_Retry` (a try to repeat) and core/cluster/frontier.py `_Again`.
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


def describe(exc: BaseException) -> str:
    """'ClassName: message', the form records and the UI show."""
    msg = str(exc).strip()
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def kind_of(error: str) -> str:
    """The error's kind is its class name, the part before the first colon."""
    return error.split(":", 1)[0]
