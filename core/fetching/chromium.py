"""Which Chromium `--browser` runs, with which flags, and how one is launched.

Apart from what the crawl does with a browser (core/fetching/browserlife.py keeps one alive,
core/fetching/tab.py renders pages in it) because it is asked on its own: the command line
checks the executable and the Playwright extra before anything starts (cli/options.py
`check`: one line, exit 2), a test replays a page in a Chromium launched with these same
FLAGS, and a flag or the lookup changes here without touching a page's life.

Chromium is the system's (`--browser-path`, else Debian's /usr/lib/chromium/chromium, else
Playwright's own if installed), headless, its own background traffic off, in a fresh profile
directory per launch; the windows scripts open (popups) are closed and nothing they ask for
reaches the network.
"""
from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import BrowserContext, Page, Playwright, Route

    from .session import CrawlSession

DEFAULT_PATH = "/usr/lib/chromium/chromium"
# Chromium reads one --disable-features, the last, and Playwright passes its own list first:
# ours repeats Playwright's (1.5x) so that its automation settings hold, then adds ours.
DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
    "OptimizationHints", "MediaRouter", "Translate",
)
FLAGS = (
    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--metrics-recording-only",
    "--no-default-browser-check", "--disable-features=" + ",".join(DISABLED_FEATURES),
    "--disable-client-side-phishing-detection", "--disable-dev-shm-usage",
    # no crash reporter: its handler leaves Chromium's process group and would outlive a killed crawl
    "--disable-breakpad", "--disable-crash-reporter",
)
# More Chromium flags, space-separated (e.g. --js-flags=--max-old-space-size=64): for a
# renderer's limits, and for tests that need a tab to crash
FLAGS_ENV = "CRAWLTOP_CHROMIUM_FLAGS"
INSTALL_PLAYWRIGHT = "--browser needs Playwright: pip install 'crawltop[browser]'"
INSTALL_CHROMIUM = ("--browser needs Chromium: apt-get install chromium (or name one with --browser-path PATH); "
                    "crawltop never downloads a browser")


def executable(path: str | None) -> str | None:
    """The Chromium to launch: `path`, else Debian's, else Playwright's own (None: none)."""
    if path:
        return path
    if os.access(DEFAULT_PATH, os.X_OK):
        return DEFAULT_PATH
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or os.path.expanduser("~/.cache/ms-playwright")
    found = sorted(glob.glob(os.path.join(root, "chromium*", "chrome-linux*", "chrome")))
    return found[-1] if found else None


def check(path: str | None) -> str:
    """The executable to launch, or a UsageError saying what to install (exit 2)."""
    try:
        import playwright.async_api  # noqa: F401  (only whether the extra is installed)
    except ImportError:
        raise UsageError(INSTALL_PLAYWRIGHT) from None
    exe = executable(path)
    if exe is None:
        raise UsageError(INSTALL_CHROMIUM)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise UsageError(f"--browser-path {exe}: not an executable file")
    return exe


# Chromium puts its singleton socket in a folder under TMPDIR; a Unix socket's path has 107
# bytes, so under a longer TMPDIR it cannot start (and says only that it closed).
SOCKET_ROOM = 60


def _short_tmpdir() -> dict[str, str]:
    """TMPDIR for Chromium: the user's, unless too long for its socket; then /tmp."""
    if len(tempfile.gettempdir()) <= SOCKET_ROOM or not os.access("/tmp", os.W_OK):
        return {}
    return {"TMPDIR": "/tmp"}


async def launch(pw: Playwright, exe: str | None, profile: str, agent: str,
                 closed: Callable[[], None]) -> BrowserContext:
    """A headless Chromium on `profile`, its first window closed; `closed` is called when it
    goes away (closed or dead)."""
    context = await pw.chromium.launch_persistent_context(
        profile, executable_path=exe, headless=True,
        chromium_sandbox=os.geteuid() != 0,  # --no-sandbox only as root, where the sandbox cannot run
        user_agent=agent, service_workers="block", accept_downloads=False,
        args=[*FLAGS, *os.environ.get(FLAGS_ENV, "").split()],
        # the crash handler, which Debian's Chromium starts whatever the flags say, runs
        # outside the browser's process group: its database in the profile names it as ours
        env={**os.environ, "BREAKPAD_DUMP_LOCATION": os.path.join(profile, "crashes"), **_short_tmpdir()})
    context.on("close", lambda _: closed())
    context.on("page", _popup)  # a page a script opened: its tab's route does not cover it
    # A tab's own route answers all of its requests; this one is left for pages nobody
    # asked for (popups): nothing they ask reaches the network
    await context.route("**/*", _refuse)
    for page in context.pages:  # the window a persistent profile opens with
        await page.close()
    return context


async def add_cookies(context: BrowserContext, session: CrawlSession | None) -> None:
    """The session's jar (--cookies, a --state crawl's jar) in the browser's, by domain,
    as aiohttp sends them."""
    jar = session.jar if session is not None else None
    if jar is None:
        return
    cookies: list[Any] = []
    for morsel in jar:
        domain = morsel["domain"]
        if domain and morsel.value is not None:
            cookies.append({"name": morsel.key, "value": morsel.value, "domain": domain,
                            "path": morsel["path"] or "/", "secure": bool(morsel["secure"])})
    if cookies:
        with contextlib.suppress(Exception):  # one the browser refuses is not sent: as a browser would
            await context.add_cookies(cookies)


async def _popup(page: Page) -> None:
    """A window a script opened: closed (the context's route refused its requests)."""
    with contextlib.suppress(Exception):
        if await page.opener() is not None:  # not one of the crawl's own tabs
            await page.close(run_before_unload=False)


async def _refuse(route: Route) -> None:
    with contextlib.suppress(Exception):
        await route.abort("blockedbyclient")


def first_line(exc: BaseException) -> str:
    """A failure in one line, for a Record's error: Playwright's messages run to many."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
