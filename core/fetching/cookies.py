"""Netscape `cookies.txt` in and out of aiohttp's cookie jar, the format curl, wget and browser extensions use.

The line format is `read`'s docstring; a saved jar holds credentials, so `write` makes it 0600, atomically.
"""
from __future__ import annotations

import os
import time
from collections.abc import Container, Iterator
from http.cookies import Morsel, SimpleCookie
from typing import NamedTuple

import aiohttp
from aiohttp.abc import AbstractCookieJar
from yarl import URL

from ..errors import UsageError
from ..localfile import MB, read_text
from ..secrets import remember

COOKIES_LIMIT = 64 * MB  # a browser's whole export is a few MB; /dev/zero is refused

HEADER = "# Netscape HTTP Cookie File\n# Written by crawltop. It holds session cookies: keep it private.\n"
_HTTPONLY = "#HttpOnly_"


def new_jar() -> aiohttp.CookieJar:
    """unsafe: cookies from IP-address hosts too (an intranet crawl); values sent as set."""
    return aiohttp.CookieJar(unsafe=True, quote_cookie=False)


class Entry(NamedTuple):
    host: str
    subdomains: bool
    path: str
    secure: bool
    expires: int  # epoch seconds; 0: a session cookie
    name: str
    value: str
    httponly: bool


def read(path: str) -> list[Entry]:
    """The live cookies of a cookies.txt. UsageError if the file can't be read or a line
    is not a cookie (the line number is named, never its value).

    One cookie a line, seven tab-separated fields:
        domain  include-subdomains  path  secure  expires  name  value
    `#HttpOnly_` in front of the domain marks an HttpOnly cookie (curl's form); other lines
    starting with `#` are comments. `expires` 0 is a session cookie. The jar itself applies
    the domain, path, secure and expiry rules when it picks the cookies for a request.
    """
    text = read_text(path, "--cookies", COOKIES_LIMIT, errors="replace").splitlines()
    now, out = time.time(), []
    for lineno, line in enumerate(text, 1):
        httponly = line.startswith(_HTTPONLY)
        if httponly:
            line = line[len(_HTTPONLY):]
        elif not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) == 6:  # an empty value at the end of the line, trailing tab lost
            fields.append("")
        if len(fields) != 7 or not fields[0].lstrip(".") or not fields[5]:
            raise UsageError(f"{path}:{lineno}: not a Netscape cookies.txt line (7 tab-separated fields)")
        domain, subdomains, cpath, secure, expires, name, value = fields
        try:
            expiry = int(float(expires or 0))
        except ValueError:
            raise UsageError(f"{path}:{lineno}: the expiry is not a number") from None
        if expiry and expiry <= now:
            continue  # expired: a browser would not send it either
        remember(value)
        out.append(Entry(domain.lstrip(".").lower(), subdomains.upper() == "TRUE" or domain.startswith("."),
                         cpath or "/", secure.upper() == "TRUE", expiry, name, value, httponly))
    return out


def load(jar: AbstractCookieJar, path: str) -> int:
    """Add the cookies of a cookies.txt to the jar; returns how many."""
    now = int(time.time())
    entries = read(path)
    for e in entries:
        morsel: Morsel[str] = Morsel()
        morsel.set(e.name, e.value, e.value)
        if e.subdomains:
            morsel["domain"] = "." + e.host
        morsel["path"] = e.path
        if e.secure:
            morsel["secure"] = True
        if e.httponly:
            morsel["httponly"] = True
        if e.expires:
            morsel["max-age"] = str(max(1, e.expires - now))
        try:
            origin = URL.build(scheme="https" if e.secure else "http", host=e.host, path="/")
        except ValueError:
            raise UsageError(f"--cookies {path}: bad domain {e.host[:80]!r}") from None
        cookie: SimpleCookie = SimpleCookie()
        cookie[e.name] = morsel
        jar.update_cookies(cookie, origin)
    return len(entries)


def lines(jar: AbstractCookieJar) -> Iterator[str]:
    """The jar as cookies.txt lines (session cookies included: a resume needs them)."""
    host_only: Container[tuple[str, ...]] = getattr(jar, "host_only_cookies", frozenset())
    expirations: dict = getattr(jar, "_expirations", {})  # absolute deadlines; None: a session cookie
    for morsel in jar:
        domain = morsel["domain"]
        path = morsel["path"] or "/"
        key = (domain, path.rstrip("/"), morsel.key)
        sub = key not in host_only
        expiry = expirations.get(key)
        prefix = _HTTPONLY if morsel["httponly"] else ""
        yield "\t".join((
            prefix + ("." + domain if sub else domain), "TRUE" if sub else "FALSE", path,
            "TRUE" if morsel["secure"] else "FALSE", str(int(expiry)) if expiry else "0",
            morsel.key, morsel.coded_value,
        ))


def save(jar: AbstractCookieJar, path: str) -> None:
    """Write the jar to `path` (0600, atomically)."""
    write(list(lines(jar)), path)


def write(cookie_lines: list[str], path: str) -> None:
    """Write lines made by lines() (0600, atomically): safe in a thread, the jar untouched.

    A saved jar holds session cookies, i.e. credentials: a crash leaves the old file or the
    new one, never half of one.
    """
    text = HEADER + "".join(line + "\n" for line in cookie_lines)
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
