"""crawltop's engine: the asyncio worker-pool crawler. Never imports textual or tui."""
from .config import CrawlConfig
from .crawler import Crawler
from .records import Record

from .. import __version__
__all__ = ["CrawlConfig", "Crawler", "Record", "__version__"]
