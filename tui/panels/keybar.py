"""The key hints at the bottom of the main screen, drawn as one line of text.

Textual's Footer recomposes (mounts a widget per key, then lays the screen out again)
whenever a binding is enabled or disabled: 20-40 ms of CPU on the crawl's own loop at
each start, stop, pause or focus change. This bar listens to the same signal and
repaints one line instead. Keys are for the keyboard here; nothing is clickable.
"""
from __future__ import annotations

from textual.screen import Screen

from ..widgets.line import Line

KEY = "bold $accent"
OFF = "dim"
PINNED = ("quit", "app.quit")  # always on the bar, however narrow (issue 27: `q` at 80x24)


class KeyBar(Line):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        # Not now: check_action may look at widgets of the screen not yet composed.
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    _entries: list[tuple[str, list]] = []

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Show every key that fits; when the bar is too narrow, drop keys from the right,
        but never a pinned one (quit), which keeps its place at the end."""
        entries = list(self._entries)
        width = self.size.width or 10_000

        def length(es: list[tuple[str, list]]) -> int:
            return sum(len(p if isinstance(p, str) else p[0]) for _, parts in es for p in parts)

        while length(entries) > width:
            droppable = [i for i, (action, _) in enumerate(entries) if action not in PINNED]
            if not droppable:
                break
            del entries[droppable[-1]]
        self.show(*(p for _, parts in entries for p in parts))

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is not self.screen:
            return
        entries: list[tuple[str, list]] = []
        shown: set[str] = set()
        palette = None
        for _node, binding, enabled, _tooltip in screen.active_bindings.values():
            if binding.action == "app.command_palette" or binding.key == self.app.COMMAND_PALETTE_BINDING:
                palette = (binding, enabled)
                continue
            if not binding.show or binding.action in shown:
                continue
            shown.add(binding.action)
            key = self.app.get_key_display(binding)
            entries.append((binding.action, [(f" {key}", KEY if enabled else OFF),
                                             (f" {binding.description} ", "" if enabled else OFF)]))
        # pinned keys go last, so a narrow bar cuts the others and keeps them in view
        entries.sort(key=lambda e: e[0] in PINNED)
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            binding, enabled = palette
            entries.append(("palette", ["  ", (self.app.get_key_display(binding), KEY),
                                        (f" {binding.description or 'palette'}", "")]))
        self._entries = entries
        self._fit()
