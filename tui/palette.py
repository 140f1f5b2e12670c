"""The command palette (ctrl+p): every key action by name, read from tui/actions.py."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

from .actions import Action, Crawl, palette, top_actions


class CrawlCommands(Provider):
    """Offers each action only when it applies (the same check the key bar uses)."""

    def _rows(self) -> Iterable[Action]:
        return palette(cast(Crawl, self.app))

    def _available(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.app
        for row in self._rows():
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


class TopCommands(CrawlCommands):
    """The dashboard's actions (tui/top/)."""

    def _rows(self) -> Iterable[Action]:
        return top_actions()
