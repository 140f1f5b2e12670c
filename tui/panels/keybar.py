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

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is not self.screen:
            return
        parts: list[str | tuple[str, str]] = []
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
            parts += [(f" {key}", KEY if enabled else OFF), (f" {binding.description} ", "" if enabled else OFF)]
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            binding, enabled = palette
            parts += ["  ", (self.app.get_key_display(binding), KEY), (f" {binding.description or 'palette'}", "")]
        self.show(*parts)
