"""A cheap text widget: it repaints only when its content changed, never relayouts.

`Static.update()` asks for a layout pass; at 5-10 Hz across a dozen widgets that is
work for nothing, since every panel here has a size fixed by the stylesheet.
"""
from __future__ import annotations

from textual.content import Content
from textual.widget import Widget


class Line(Widget):
    """Renders a Content; `show()` repaints only if the parts differ."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._parts: tuple = ()
        self._content: Content = Content("")

    def show(self, *parts: str | tuple[str, str]) -> None:
        """Parts as for `Content.assemble`: plain strings or (text, style) pairs.

        Strings are never parsed as markup, and Content strips control codes.
        """
        if parts == self._parts:
            return
        self._parts = parts
        self._content = Content.assemble(*parts)
        self.refresh()

    @property
    def plain(self) -> str:
        return self._content.plain

    def render(self) -> Content:
        return self._content
