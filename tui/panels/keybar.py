"""The key hints at the bottom of every screen, drawn as one line of text.

Textual's Footer recomposes (mounts a widget per key, then lays the screen out again)
whenever a binding is enabled or disabled: 20-40 ms of CPU on the crawl's own loop at
each start, stop, pause or focus change. This bar listens to the same signal and
repaints one line instead. Keys are for the keyboard here; nothing is clickable.

Whatever the width, a screen's way out and its help stay on the bar: a person who lands
on any screen in an 80x24 terminal can read how to leave it and how to learn the rest.
"""
from __future__ import annotations

from collections.abc import Sequence

from textual.screen import Screen

from ..widgets.line import Line

KEY = "bold $accent"
OFF = "dim"
HELP = ("help", "app.help")
# A screen's ways out, in the order the bar shows them at its right end (quit last).
LEAVE = ("to_list", "close", "cancel", "detach", "quit", "app.quit")
PINNED = HELP + LEAVE  # never cut, however narrow
SPARE = ("more(10)", "fewer(10)", "palette")  # cut first: + and - stay, the help names ctrl+p


def _rank(action: str) -> int:
    """What a narrow bar cuts first: 0 (spare), then 1 (the rest), never 2 (pinned)."""
    return 2 if action in PINNED else 0 if action in SPARE else 1


def _order(action: str) -> int:
    """Pinned keys go last, help before the ways out, so a cut bar ends with them."""
    if action in HELP:
        return 1
    return 2 + LEAVE.index(action) if action in LEAVE else 0


class KeyBar(Line):
    """The screen's keys (its bindings, its app's when the screen is not modal), and
    `hints`: keys its widgets handle that no binding of the screen shows (a prompt's enter)."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    """

    def __init__(self, hints: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.hints = tuple(hints)
        self._entries: list[tuple[str, list]] = []

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        # Not now: check_action may look at widgets of the screen not yet composed.
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Show every key that fits; when the bar is too narrow, cut the spare keys, then
        the others, from the right, but never a pinned one (help, the ways out)."""
        entries = list(self._entries)
        width = self.size.width or 10_000

        def length(es: list[tuple[str, list]]) -> int:
            return sum(len(p if isinstance(p, str) else p[0]) for _, parts in es for p in parts)

        while length(entries) > width:
            droppable = [(_rank(action), i) for i, (action, _) in enumerate(entries) if _rank(action) < 2]
            if not droppable:
                break
            del entries[min(droppable, key=lambda r: (r[0], -r[1]))[1]]
        self.show(*(p for _, parts in entries for p in parts))

    def _bindings_changed(self, screen: Screen) -> None:
        if screen is not self.screen:
            return
        entries: list[tuple[str, list]] = [(f"hint:{key}", [(f" {key}", KEY), (f" {what} ", "")])
                                           for key, what in self.hints]
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
        entries.sort(key=lambda e: _order(e[0]))  # stable: the rest keep the bindings' order
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            binding, enabled = palette
            entries.append(("palette", ["  ", (self.app.get_key_display(binding), KEY),
                                        (f" {binding.description or 'palette'}", "")]))
        self._entries = entries
        self._fit()
