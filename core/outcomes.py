"""One vocabulary of outcomes: what became of a URL, the same words on every surface.

The TUI, the headless report, `ctl status`, `crawltop report` and the exports all count
a crawl's records with `outcome()` and `KIND_OUTCOME`, so the same crawl shows the same
numbers everywhere (ARCHITECTURE.md, "Words"):

* fetched     - an HTTP answer, counted by status class (a 404 is a status, not an error)
* redirected  - a 3xx followed or merged (a merge is a redirect to a URL already seen)
* failed      - no usable answer after its tries; its `error_kind` says why. "errors" means these
* skipped     - never requested by choice: robots.txt, an ignore rule
* cancelled   - never fetched because the crawl stopped: not an error

`reason()` turns a failed record's kind and error text into a phrase a user understands
("connection refused", "timed out after 30 s"), the class name only when nothing better is known.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import KINDS

FETCHED, REDIRECTED, FAILED, SKIPPED, CANCELLED = "fetched", "redirected", "failed", "skipped", "cancelled"
OUTCOMES: tuple[str, ...] = (FETCHED, REDIRECTED, FAILED, SKIPPED, CANCELLED)
REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))

# Every error_kind maps to exactly one outcome; tests/engine/test_outcomes.py holds it to KINDS.
KIND_OUTCOME: dict[str, str] = {
    "dns": FAILED,
    "connect": FAILED,
    "timeout": FAILED,
    "reset": FAILED,
    "tls": FAILED,
    "truncated": FAILED,
    "http-status": FAILED,
    "too-many-redirects": FAILED,
    "missing-location": FAILED,
    "robots": SKIPPED,
    "ignored": SKIPPED,
    "cancelled": CANCELLED,
    "host-retired": FAILED,
    "bad-url": FAILED,
    "bad-sitemap": FAILED,
    "other": FAILED,
}
assert set(KIND_OUTCOME) == set(KINDS), "every error_kind needs its outcome"

# The words of each kind when the error text says nothing more precise.
KIND_WORDS: dict[str, str] = {
    "dns": "name does not resolve",
    "connect": "could not connect",
    "timeout": "timed out",
    "reset": "connection closed by the server",
    "tls": "TLS handshake failed",
    "truncated": "body cut short",
    "http-status": "server error after retries",
    "too-many-redirects": "too many redirects",
    "missing-location": "redirect without a Location",
    "robots": "blocked by robots.txt",
    "ignored": "matched an ignore rule",
    "cancelled": "cancelled: the crawl stopped first",
    "host-retired": "host retired after failures in a row",
    "bad-url": "not a URL that can be requested",
    "bad-sitemap": "unreadable sitemap",
    "other": "unexpected error",
}


def outcome(status: int | None, error_kind: str | None, error: str | None = None) -> str:
    """The outcome of one record, from its status and error_kind (its error for records
    written before error_kind existed)."""
    if error_kind is None and error:
        error_kind = _legacy_kind(error)
    if error_kind is not None:
        return KIND_OUTCOME.get(error_kind, FAILED)
    if status in REDIRECT_STATUSES:
        return REDIRECTED
    if status is not None:
        return FETCHED
    return FAILED


def status_class(status: int | None) -> str:
    """'2xx', '4xx' ...: how fetched records are counted."""
    return f"{status // 100}xx" if isinstance(status, int) and 100 <= status < 600 else "other"


def _legacy_kind(error: str) -> str:
    name = error.split(":", 1)[0]
    return {"BlockedByRobots": "robots", "Cancelled": "cancelled", "Ignored": "ignored",
            "HostRetired": "host-retired"}.get(name, "other")


# -- reasons in words ------------------------------------------------------------------------
# (pattern in the error text, phrase); the first match wins. Texts are aiohttp's, asyncio's,
# the OS's (errno strings) and OpenSSL's, which stay stable across versions.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.I), w) for p, w in (
    (r"connection refused|errno 111\b|\[Errno 61\]", "connection refused"),
    (r"name or service not known|nodename nor servname|no address associated|"
     r"temporary failure in name resolution|name does not resolve|getaddrinfo failed|"
     r"ClientConnectorDNSError|gaierror", "name does not resolve"),
    (r"network is unreachable", "network unreachable"),
    (r"no route to host", "no route to host"),
    (r"certificate has expired|certificate expired", "TLS certificate expired"),
    (r"self[- ]signed certificate", "TLS certificate is self-signed"),
    (r"hostname mismatch|doesn't match|not valid for", "TLS certificate is for another name"),
    (r"certificate verify failed", "TLS certificate not trusted"),
    (r"connection reset", "connection reset by the server"),
    (r"server disconnected", "server closed the connection"),
    (r"broken pipe", "connection closed while sending"),
    (r"not enough data|content-length|payload", "body cut short"),
))
_WITHIN = re.compile(r"within (\d+(?:\.\d+)?)\s*s\b")
_HTTP = re.compile(r"HTTP (\d{3})")


def reason(error_kind: str | None, error: str | None, timeout: float | None = None) -> str:
    """A failed (or skipped, cancelled) URL's reason in words, e.g. `connection refused`,
    `name does not resolve`, `timed out after 30 s`, `HTTP 503 after 3 tries`."""
    text = error or ""
    kind = error_kind or (_legacy_kind(text) if text else "other")
    if kind == "timeout":
        m = _WITHIN.search(text)
        secs = m.group(1) if m else (f"{timeout:g}" if timeout else "")
        return f"timed out after {secs} s" if secs else "timed out"
    if kind == "http-status":
        m = _HTTP.search(text)
        return f"{text.split(': ', 1)[-1]}" if m else KIND_WORDS[kind]
    if kind in ("dns", "connect", "tls", "reset", "truncated", "other", "bad-url"):
        for pattern, words in _PHRASES:
            if pattern.search(text):
                return words
    if kind == "other" and text:
        return text.split(":", 1)[0]  # the class name: nothing better is known
    return KIND_WORDS.get(kind, kind)


class Tally:
    """Counts of outcomes and of fetched records by status class, kept as records are
    emitted (core/monitor/stats.py) or read back (core/reporting/)."""

    __slots__ = ("counts", "classes")

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.classes: dict[str, int] = {}

    def add(self, status: int | None, error_kind: str | None, error: str | None = None) -> str:
        what = outcome(status, error_kind, error)
        self.counts[what] += 1
        if what == FETCHED:
            c = status_class(status)
            self.classes[c] = self.classes.get(c, 0) + 1
        return what


def outcome_line(counts: Mapping[str, int], classes: Mapping[str, int]) -> str:
    """`fetched 40 (2xx 30, 4xx 10)  redirected 2  failed 3  skipped 1  cancelled 0`: the one
    line every text surface prints."""
    by_class = ", ".join(f"{c} {n:,}" for c, n in sorted(classes.items()) if n)
    parts = [f"fetched {counts.get(FETCHED, 0):,}" + (f" ({by_class})" if by_class else "")]
    parts += [f"{o} {counts.get(o, 0):,}" for o in OUTCOMES[1:]]
    return "  ".join(parts)


# The machine looks offline when nearly all other hosts' names fail: at least OFFLINE_AFTER of
# them, and OFFLINE_SHARE of the other hosts heard of (one that answers, a mirror or a proxy's
# own name, must not hide twenty that cannot; a small site with a few dead domains must still
# fail its link check). The live notice and `report` share the rule.
OFFLINE_AFTER = 10
OFFLINE_SHARE = 0.9
