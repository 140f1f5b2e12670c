"""crawltop's engine: the asyncio worker-pool crawler. Never imports textual or tui."""
from core.config import CrawlConfig
from core.crawler import Crawler
from core.records import Record

__version__ = "0.1.0"
__all__ = ["CrawlConfig", "Crawler", "Record", "__version__"]
