"""Every failure crawltop names itself, in one place (httpx-style).

Network failures keep aiohttp's / asyncio's own class names in records; these are
the conditions the crawler itself decides are errors.
"""


class CrawlError(Exception):
    """Base of the crawler's own error conditions."""


class UsageError(CrawlError):
    """Bad command-line input: exit code 2 with a one-line message."""


class RedirectError(CrawlError):
    """A redirect response we could not follow."""


class MissingLocation(RedirectError):
    """3xx without a usable Location header."""


class TooManyRedirects(RedirectError):
    """The chain was longer than --max-redirect."""


class BlockedByRobots(CrawlError):
    """robots.txt disallows this URL for our user agent."""


class HTTPStatusError(CrawlError):
    """A retryable status (429, 5xx) that was still failing after --max-tries."""


class Cancelled(CrawlError):
    """The URL was in flight or queued when the crawl stopped."""


def describe(exc: BaseException) -> str:
    """'ClassName: message', the form records and the UI show."""
    msg = str(exc).strip()
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def kind_of(error: str) -> str:
    """The error's kind is its class name, the part before the first colon."""
    return error.split(":", 1)[0]
