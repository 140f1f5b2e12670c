"""The command palette (ctrl+p): every key action by name, read from tui/actions.py."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

from .actions import Crawl, palette


class CrawlCommands(Provider):
    """Offers each action only when it applies (the same check the key bar uses)."""

    def _available(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.app
        for row in palette(cast(Crawl, app)):
            if app.check_action(row.name, row.params):
                help_text = escape(f"{row.description} ({row.shown_key})")  # the palette reads it as markup
                yield row.title, partial(app.run_action, row.action), help_text

    async def discover(self) -> Hits:
        for title, callback, help_text in self._available():
            yield DiscoveryHit(escape(title), callback, text=title, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
