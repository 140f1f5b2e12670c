"""crawltop's engine: the asyncio worker-pool crawler. Never imports textual or tui."""
from .. import __version__
from .config import CrawlConfig
from .crawler import Crawler
from .output.records import Record

__all__ = ["CrawlConfig", "Crawler", "Record", "__version__"]
