"""Which Chromium `--browser` runs, with which flags, and how one is launched.

Apart from what the crawl does with a browser (core/fetching/browserlife.py keeps one alive,
core/fetching/tab.py renders pages in it) because it is asked on its own: the command line
checks the executable and the Playwright extra before anything starts (cli/options.py
`check`: one line, exit 2), a test replays a page in a Chromium launched with these same
FLAGS, and a flag or the lookup changes here without touching a page's life.

Chromium is the system's (`--browser-path`, else Debian's /usr/lib/chromium/chromium, else
Playwright's own if installed), headless, its own background traffic off, in a fresh profile
directory per launch; the windows scripts open (popups) are blocked by Chromium's own popup
blocker (one that opens anyway is closed), pages get no SharedWorker (its own process would
send requests no tab pauses), every frame of a page runs in the page's renderer
(so the tab's DevTools session pauses all of its requests, core/fetching/devtools.py), and
--proxy is Chromium's own (`proxy_flags`).
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
    from playwright.async_api import BrowserContext, Page, Playwright

    from .session import CrawlSession

DEFAULT_PATH = "/usr/lib/chromium/chromium"
# Chromium reads one --disable-features, the last, and Playwright passes its own list first:
# ours repeats Playwright's (1.5x) so that its automation settings hold, then adds ours.
DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
    "OptimizationHints", "MediaRouter", "Translate",
    # One renderer for every frame of a page: the tab's DevTools session pauses the requests
    # of its own renderer only (core/fetching/devtools.py), so a frame in a process of its
    # own (another site's, a sandboxed one) would load around the crawl's rules
    "IsolateOrigins", "site-per-process", "IsolateSandboxedIframes",
    # A document the crawl fulfilled has no address of its own, so Chromium would take it for
    # a public page and refuse its requests to a private or loopback host (Local Network
    # Access): the crawl's rules decide what a page may load, not where its document came from
    "LocalNetworkAccessChecks",
)
FLAGS = (
    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--metrics-recording-only",
    "--no-default-browser-check", "--disable-features=" + ",".join(DISABLED_FEATURES),
    "--disable-client-side-phishing-detection", "--disable-dev-shm-usage",
    # no crash reporter: its handler leaves Chromium's process group and would outlive a killed crawl
    "--disable-breakpad", "--disable-crash-reporter",
    "--disable-site-isolation-trials",
)
# Playwright's switches the crawl takes back: with Chromium's popup blocker on, a script's
# window.open() opens nothing (no tab of the crawl's own would pause its requests)
UNDONE = ("--disable-popup-blocking",)
# More Chromium flags, space-separated (e.g. --js-flags=--max-old-space-size=64): for a
# renderer's limits, and for tests that need a tab to crash
FLAGS_ENV = "CRAWLTOP_CHROMIUM_FLAGS"
NO_SHARED_WORKER = "delete window.SharedWorker;"  # run in every frame before the page's scripts
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


def proxy_flags(proxy: str | None, env_proxy: bool) -> list[str]:
    """The crawl's proxy for Chromium's network stack. Chromium bypasses loopback by default
    (`<loopback>`): `<-loopback>` takes that back, so a site on 127.0.0.1 goes through the
    proxy as it does on aiohttp. No --proxy and no HTTP_PROXY wanted (--no-proxy): no proxy,
    whatever the environment says (Chromium reads it on Linux)."""
    if proxy:
        return [f"--proxy-server={proxy}", "--proxy-bypass-list=<-loopback>"]
    return [] if env_proxy else ["--no-proxy-server"]


async def launch(pw: Playwright, exe: str | None, profile: str, agent: str, closed: Callable[[], None], *,
                 proxy: str | None = None, env_proxy: bool = False) -> BrowserContext:
    """A headless Chromium on `profile`, its first window closed; `closed` is called when it
    goes away (closed or dead). `proxy` has no credentials: Playwright's `proxy=` would
    answer the proxy's challenge by intercepting every request itself, so each tab answers
    it (core/fetching/devtools.py `authorize`)."""
    context = await pw.chromium.launch_persistent_context(
        profile, executable_path=exe, headless=True,
        chromium_sandbox=os.geteuid() != 0,  # --no-sandbox only as root, where the sandbox cannot run
        user_agent=agent, service_workers="block", accept_downloads=False,
        args=[*FLAGS, *proxy_flags(proxy, env_proxy), *os.environ.get(FLAGS_ENV, "").split()],
        ignore_default_args=list(UNDONE),
        # the crash handler, which Debian's Chromium starts whatever the flags say, runs
        # outside the browser's process group: its database in the profile names it as ours
        env={**os.environ, "BREAKPAD_DUMP_LOCATION": os.path.join(profile, "crashes"), **_short_tmpdir()})
    # A shared worker runs in a process of its own, whose requests no tab's DevTools session
    # pauses: they would reach the server past robots.txt and --exclude, unrecorded. Pages
    # get none (a site's script that tests for it falls back, as in a browser without them);
    # a dedicated Worker stays, its requests are the page renderer's
    await context.add_init_script(NO_SHARED_WORKER)
    context.on("close", lambda _: closed())
    # a page a script opened anyway (the popup blocker lets one through on a user's gesture,
    # which no crawl makes): closed at once
    context.on("page", _popup)
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
    """A window a script opened: closed."""
    with contextlib.suppress(Exception):
        if await page.opener() is not None:  # not one of the crawl's own tabs
            await page.close(run_before_unload=False)


def first_line(exc: BaseException) -> str:
    """A failure in one line, for a Record's error: Playwright's messages run to many."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
