"""crawltop's engine: the asyncio worker-pool crawler. Never imports textual or tui.

The names below are loaded on first use (PEP 562): `crawltop --version`, `ls` and `ctl`
import parts of core/ without paying for aiohttp and the crawler: those commands must start at once."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__

if TYPE_CHECKING:
    from .config import CrawlConfig
    from .crawler import Crawler
    from .output.records import Record

__all__ = ["CrawlConfig", "Crawler", "Record", "__version__"]
_LAZY = {"CrawlConfig": ".config", "Crawler": ".crawler", "Record": ".output.records"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
