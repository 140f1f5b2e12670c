"""What a crawl is told in confidence: request headers, proxy credentials, cookies.

They live only in the running process's CrawlConfig and HTTP session (core/fetching/session.py);
everything that leaves the process gets a redacted form made here (`redact_config`,
`redact_pairs`, `scrub`), and `missing` guards a resume. Cookies are a separate file (core/fetching/cookies.py).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from .errors import UsageError

if TYPE_CHECKING:
    from .config import CrawlConfig

REDACTED = "REDACTED"
# The options whose values never go on a command line (`ps` shows it to everyone): a detaching
# parent (cli/detach.py) and the dashboard's `n` (tui/top/launch.py) pass them to the crawl in
# this environment variable, as a JSON list, which only its user and root can read
# (/proc/PID/environ keeps it for the crawl's life, even after os.environ.pop).
SECRET_OPTIONS = ("--header", "--proxy")
SECRET_ARGS = "CRAWLTOP_SECRET_ARGS"
# Credential headers: sent only to the roots' hosts (or --header-host), redacted everywhere.
CREDENTIALS = frozenset(("authorization", "cookie", "proxy-authorization"))
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 field-name
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # CR, LF, NUL... (tab is allowed)
# Process-wide, filled as secrets are parsed: a process runs one crawl's secrets, and
# remembering more than needed only scrubs more (error texts, archived header values).
_known: set[str] = set()  # secret strings, for scrub()


def secret_option(word: str) -> str | None:
    """The secret option `word` names (`--proxy`, `--prox=URL`, `--he`...), or None.

    Any prefix counts, as an abbreviating parser would take it: the CLI refuses abbreviations
    (allow_abbrev=False), but the checks that keep secrets off screens and command lines must
    not depend on that alone.
    """
    name = word.split("=", 1)[0]
    if len(name) < 3 or not name.startswith("--"):
        return None
    return next((o for o in SECRET_OPTIONS if o.startswith(name)), None)


def has_control(value: str) -> bool:
    """A CR, LF, NUL... in a header value (a tab may stand there): it would end the header."""
    return _BAD_VALUE.search(value) is not None


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` -> (name, value); UsageError (exit 2) for anything else."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep:
        raise UsageError("--header wants 'Name: value': there is no ':' in it")
    if not _TOKEN.fullmatch(name):
        raise UsageError(f"--header wants 'Name: value': {name[:40]!r} is not a header name")
    if has_control(value):
        raise UsageError(f"--header {name}: the value holds a control character (CR, LF, NUL...)")
    return name, value


def parse_headers(texts: Iterable[str]) -> list[tuple[str, str]]:
    out = [parse_header(t) for t in texts]
    for _, value in out:
        remember(value)
    return out


def split_proxy(url: str) -> tuple[str, str | None, str | None]:
    """(proxy URL without credentials, user, password); UsageError if not http(s)://host."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # its text may quote the password ("...cast to integer value as 'pa55w0rd'")
        raise UsageError("bad --proxy URL: want http://[USER:PASSWORD@]HOST[:PORT] with a numeric port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--proxy wants http://[USER:PASSWORD@]HOST[:PORT] (or https://)")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{port}" if port else "")
    user = parts.username
    password = parts.password
    for s in (user, password):
        if s:
            remember(s)
    return (urlunsplit((parts.scheme, netloc, "", "", "")),
            unquote(user) if user is not None else None, unquote(password) if password is not None else None)


def redact_proxy(url: str | None) -> str | None:
    if not url:
        return url
    try:
        bare, user, password = split_proxy(url)
    except UsageError:
        return REDACTED
    if user is None and password is None:
        return bare
    scheme, rest = bare.split("://", 1)
    return f"{scheme}://{REDACTED}@{rest}"


def redact_config(config: CrawlConfig) -> CrawlConfig:
    """The config as it may be written down: no header value, no proxy credentials.

    For the settings saved in a `--state` file and in Redis (called by `config_to_json`):
    header names are kept, values become REDACTED; a proxy keeps its scheme, host and port.
    """
    headers = tuple(f"{h.partition(':')[0].strip()}: {REDACTED}" for h in config.headers)
    return dataclasses.replace(config, headers=headers, proxy=redact_proxy(config.proxy))


def missing(config: CrawlConfig) -> list[str]:
    """The secrets a config read back from a state file or Redis still lacks.

    A resumed or joined crawl whose saved settings hold REDACTED placeholders needs the
    secrets on its own command line: the CLI refuses to start without them (exit 2) rather
    than crawl a site logged out.
    """
    out = [f"--header '{h.partition(':')[0].strip()}: ...'" for h in config.headers
           if h.partition(":")[2].strip() == REDACTED]
    if config.proxy and f"{REDACTED}@" in config.proxy:
        out.append(f"--proxy {config.proxy.replace(REDACTED, 'USER:PASSWORD')}")
    return out


def require(config: CrawlConfig, what: str) -> None:
    """UsageError naming every secret `what` (a resume, a join) must be given again."""
    gone = missing(config)
    if gone:
        raise UsageError(f"{what} needs its secrets again (they are never stored): give {' '.join(gone)}")


def redact_pairs(pairs: Iterable[tuple[str, str]], names: Iterable[str] = (), *,
                 request: bool = True) -> list[tuple[str, str]]:
    """Header pairs for an archive. A request's credential headers, --header headers and
    `names` get REDACTED values; a response's Set-Cookie keeps its cookie's name and
    attributes, not its value. Any remembered secret is scrubbed from the rest.

    The crawler hands the `--header` names to its archive sinks (WARC request records).
    """
    hide = (CREDENTIALS | {n.lower() for n in names}) if request else frozenset()
    out = []
    for name, value in pairs:
        low = name.lower()
        if low in hide:
            value = REDACTED
        elif low == "set-cookie":
            cookie, sep, attrs = value.partition(";")
            value = f"{cookie.partition('=')[0]}={REDACTED}{sep}{attrs}"
        out.append((name, scrub(value)))
    return out


def remember(value: str) -> None:
    """Note a secret this process holds, so scrub() can take it out of any text."""
    if len(value) >= 4:  # shorter strings would scrub ordinary words
        _known.add(value)


def scrub(text: str) -> str:
    """Text with every remembered secret replaced by REDACTED (error messages, logs)."""
    for s in _known:
        if s in text:
            text = text.replace(s, REDACTED)
    return text

