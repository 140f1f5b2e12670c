"""Small formatting helpers shared by the widgets.

Everything that came from a server (URLs, hosts, error messages) goes through
`safe()`: control and escape characters are replaced by `core/monitor/sanitize.py clean`, and the
result is a `rich.text.Text` built with the plain-text constructor, so square brackets
are never parsed as markup.
"""
from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from rich.text import Text

from ..core.monitor.hosttext import secs as seconds  # noqa: F401  (time in a phase: 0.4s, 12s, 3m05s; one wording)
from ..core.monitor.sanitize import clean


def safe(value: object, style: str = "", limit: int = 500) -> Text:
    """Untrusted text as a single-line, plain (never markup) Text."""
    return Text(clean(value, limit), style=style, no_wrap=True, overflow="ellipsis", end="")


def plain(value: str, style: str = "") -> Text:
    """Our own text (numbers, labels) as a Text; still never parsed as markup."""
    return Text(value, style=style, no_wrap=True, overflow="ellipsis", end="")


def short_url(url: str | None) -> str:
    """The URL without its scheme: what fits in a narrow column."""
    if not url:
        return ""
    for prefix in ("https://", "http://"):
        if url.startswith(prefix):
            return url[len(prefix) :]
    return url


def netloc(url: str | None) -> str:
    """Lower-case host[:port] without a default port; '' if unparsable."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return ""
    if port and not ((parts.scheme == "http" and port == 80) or (parts.scheme == "https" and port == 443)):
        return f"{host}:{port}"
    return host


def home_hosts(roots: Iterable[object] | None) -> frozenset[str]:
    """The roots' hosts (with and without www.): their URLs are shown by path alone."""
    out: set[str] = set()
    for root in roots or ():
        host = netloc(str(root))
        if host:
            out.add(host)
            out.add(host[4:] if host.startswith("www.") else "www." + host)
    return frozenset(out)


def display_url(url: str | None, home: frozenset[str] = frozenset()) -> str:
    """Path and query for a URL on a root's host; the URL without scheme otherwise."""
    if not url:
        return ""
    if home and netloc(url) in home:
        return url_path(url)
    return short_url(url)


def short_kind(kind: str) -> str:
    """'ClientConnectorError' -> 'ClientConnector': the suffix carries nothing in a column."""
    return kind[:-5] if kind.endswith("Error") and len(kind) > 5 else kind


def url_path(url: str | None) -> str:
    """Path and query only (the host has its own column)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    path = parts.path or "/"
    return path + ("?" + parts.query if parts.query else "")


def count(n: int | float) -> str:
    """1234567 -> '1,234,567'."""
    return f"{int(n):,}"


def compact(n: int | float) -> str:
    """Counts that must fit in a few cells: 999, 12.3k, 4.5M."""
    n = float(n)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return f"{int(n)}"


def human_bytes(n: int | float) -> str:
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def duration(elapsed: float) -> str:
    """Elapsed time as H:MM:SS (or M:SS under an hour)."""
    s = max(0, int(elapsed))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def rate(value: float) -> str:
    return f"{value:,.0f}/s" if value >= 10 else f"{value:.1f}/s"


def millis(value: float) -> str:
    return f"{value:,.0f}ms" if value < 10_000 else f"{value / 1000:.0f}s"
