"""The main screen's key actions, one row each: the bindings, the key bar, the help screen
and the command palette are all read from this table, so they say the same thing.

A row's `label` is the key bar's word, `title` names the action in the palette (it has to
read on its own there), and `description` is what the help screen, the palette and the
binding's tooltip say. Whether an action can run right now is `CrawlApp.check_action`'s
call; `when` only says whether it exists at all for this kind of crawl.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from textual.actions import parse
from textual.binding import Binding, BindingType
from textual.keys import format_key

CONC = Binding.Group("conc", compact=False)  # the concurrency steps, kept together

# "remote": only a monitor of a crawl in another process (core/sockets/client.py); "cluster": only a
# crawl shared through Redis (core/cluster/view.py); "list": only a monitor opened from the
# dashboard (`crawltop` alone, tui/top/), which esc takes back to the list.
When = Literal["always", "remote", "cluster", "list"]


class Crawl(Protocol):
    """What `when` is decided on (CrawlApp has both)."""

    @property
    def can_detach(self) -> bool: ...  # a monitor of a crawl in another process

    @property
    def cluster(self) -> bool: ...  # a crawl shared through Redis

    @property
    def from_list(self) -> bool: ...  # opened from the dashboard


@dataclass(frozen=True)
class Action:
    """One key action: the key, what it runs, and the words for it wherever it is shown."""

    id: str  # the binding's id: what a keymap names
    key: str  # Textual's key name
    action: str  # what the key runs, as Textual parses it: "more(10)", "process('stop')"
    label: str  # the key bar
    title: str  # the command palette
    description: str  # the help screen, the palette, the binding's tooltip
    display: str | None = None  # the key as shown, when its name is not it ("plus": "+")
    show: bool = True  # in the key bar
    when: When = "always"
    aliases: tuple[str, ...] = ()  # more keys for it, hidden from the key bar (one help line for all)
    urgent: tuple[str, ...] = ()  # more keys for it that work even while a prompt has the keyboard
    group: Binding.Group | None = None

    @property
    def name(self) -> str:
        return parse(self.action)[1]

    @property
    def params(self) -> tuple[object, ...]:
        return tuple(parse(self.action)[2])

    @property
    def shown_key(self) -> str:
        return self.display or self.key

    def applies(self, crawl: Crawl) -> bool:
        if self.when == "remote":
            return crawl.can_detach
        if self.when == "cluster":
            return crawl.cluster
        if self.when == "list":
            return crawl.from_list
        return True

    def bindings(self) -> list[Binding]:
        main = Binding(self.key, self.action, self.label, show=self.show, key_display=self.display,
                       tooltip=self.description, id=self.id, group=self.group)
        return ([main] + [Binding(key, self.action, show=False) for key in self.aliases]
                + [Binding(key, self.action, show=False, priority=True) for key in self.urgent])


ACTIONS: tuple[Action, ...] = (
    Action("pause", "p", "pause", "Pause", "Pause crawl",
           "Pause the crawl: no new fetches; those in flight finish"),
    Action("resume", "p", "resume", "Resume", "Resume crawl", "Resume the crawl: workers take URLs again"),
    Action("more", "plus", "more(1)", "+1", "Concurrency +1", "One more worker",
           display="+", aliases=("equals_sign",), group=CONC),
    Action("fewer", "minus", "fewer(1)", "-1", "Concurrency -1", "One worker fewer (it retires after its URL)",
           display="-", group=CONC),
    Action("more10", "right_square_bracket", "more(10)", "+10", "Concurrency +10", "Ten more workers",
           display="]", aliases=("greater_than_sign",), group=CONC),
    Action("fewer10", "left_square_bracket", "fewer(10)", "-10", "Concurrency -10", "Ten workers fewer",
           display="[", aliases=("less_than_sign",), group=CONC),
    Action("concurrency", "c", "set_concurrency", "Set", "Set concurrency…", "Type a number of workers"),
    Action("cancel-worker", "x", "cancel_worker", "Cancel", "Cancel selected worker",
           "Cancel the selected worker; its URL is re-queued"),
    Action("errors", "e", "errors", "Errors", "Error list", "Full error list, filterable"),
    Action("merges", "r", "merges", "Merges", "Redirect merges", "Redirect merges and redirects, filterable"),
    Action("summary", "s", "summary", "Summary", "Summary", "Summary of the finished crawl"),
    Action("help", "question_mark", "help", "Help", "Help: keys", "Every key", display="?"),
    # Steering (core/steering/steer.py): in the help screen and the palette, not the key bar.
    Action("queue", "u", "queue", "Queue", "Queue view", "Queue view: top prefixes, growth, traps, next URLs",
           show=False),
    Action("queues", "H", "queues", "Host queues", "Host queues",
           "Host queues: every host's state, queue, delay; sort, filter", display="H", show=False),
    Action("ignore", "i", "ignore", "Ignore", "Ignore URLs…",
           "Add an ignore regex (on the full URL); matching queued URLs are dropped", show=False),
    Action("ignores", "I", "ignores", "Ignores", "Ignore patterns",
           "Ignore patterns: what each dropped and stopped; delete one", display="I", show=False),
    Action("add-seed", "a", "add_seed", "Add URL", "Add a URL…", "Add a URL to the crawl (a new seed)", show=False),
    Action("host-pause", "h", "toggle_host", "Pause host", "Pause / resume selected host",
           "In the hosts panel: pause / resume the selected host", show=False),
    Action("host-delay", "t", "host_delay", "Host delay", "Set selected host's delay…",
           "In the hosts panel: set the selected host's delay", show=False),
    # A shared crawl (core/cluster/view.py): the selected row of the processes panel.
    Action("process-pause", "P", "process('pause')", "Pause process", "Pause selected process",
           "In the processes panel: pause the selected process", display="P", show=False, when="cluster"),
    Action("process-resume", "R", "process('resume')", "Resume process", "Resume selected process",
           "In the processes panel: resume the selected process", display="R", show=False, when="cluster"),
    Action("process-stop", "K", "process('stop')", "Stop process", "Stop selected process",
           "In the processes panel: stop the selected process (its URLs go back)", display="K", show=False,
           when="cluster"),
    Action("quit", "q", "quit", "Quit", "Quit crawltop", "Quit; asks first while the crawl runs",
           urgent=("ctrl+c", "ctrl+q")),
    Action("detach", "d", "detach", "Detach", "Detach",
           "Close this monitor; the crawl goes on (attached monitors only)", when="remote"),
    Action("back", "escape", "to_list", "Back", "Back to the list",
           "Back to the list of crawls; this one goes on", display="esc", when="list"),
)

# The dashboard (`crawltop` alone, tui/top/): the keys that act on the selected crawl are the
# main screen's own rows (the same words), then the dashboard's.
TOP_SHARED = ("pause", "resume", "more", "fewer", "more10", "fewer10", "ignore")
TOP_OWN: tuple[Action, ...] = (
    Action("open", "enter", "open", "Open", "Open selected crawl",
           "Open the selected crawl's monitor (esc or d comes back to the list)"),
    Action("stop", "k", "stop", "Stop", "Stop selected crawl…",
           "Stop the selected crawl (asks first): in-flight work is put back, records flushed"),
    Action("new", "n", "new", "New", "Start a crawl…",
           "Start a crawl, detached: a URL and options as on the command line"),
    Action("dismiss", "x", "dismiss", "Dismiss", "Dismiss ended crawl",
           "Remove the selected ended crawl from the list"),
    Action("sort", "o", "sort(1)", "Sort", "Next sort order",
           "Sort by the next column: name, state, pages, rate, queued, failed, elapsed (O: back)"),
    Action("sort-back", "O", "sort(-1)", "Sort back", "Previous sort order", "Sort by the previous column",
           display="O", show=False),
    Action("filter", "slash", "filter", "Filter", "Filter crawls…", "Type to filter by name, state or root",
           display="/"),
    # after the others: the first a narrow key bar cuts (help and the palette have it)
    Action("dismiss-all", "X", "dismiss_all", "Dismiss all", "Dismiss all ended crawls…",
           "Remove every ended crawl from the list, for every dashboard (asks first)", display="X"),
    Action("help", "question_mark", "help", "Help", "Help: keys", "Every key", display="?"),
    Action("quit", "q", "quit", "Quit", "Quit crawltop", "Quit the dashboard; the crawls go on",
           urgent=("ctrl+c", "ctrl+q")),
)


TOP_QUIET = ("more10", "fewer10")  # on the dashboard, out of the key bar (80 columns hold the rest)


def top_actions() -> tuple[Action, ...]:
    """The dashboard's rows, in the key bar's order: open, the shared ones, then its own."""
    shared = tuple(replace(row, show=False) if row.id in TOP_QUIET else row
                   for row in ACTIONS if row.id in TOP_SHARED)
    return (TOP_OWN[0], *shared, *TOP_OWN[1:])

# Keys the help screen lists besides the actions: Textual's own, and the panels'.
NAV_KEYS: tuple[tuple[str, str], ...] = (
    ("tab", "next panel: workers, errors, merges, hosts; shift+tab back"),
    ("↑ ↓ pgup pgdn", "move the selection in a panel (home, end too)"),
    ("ctrl+p", "command palette: every action by name"),
    ("escape", "close a list, prompt or help"),
    ("/", "in the error and merge lists: type to filter"),
)


def bindings(table: tuple[Action, ...] = ACTIONS) -> list[BindingType]:
    """CrawlApp.BINDINGS (or the dashboard's, from top_actions()): each action's key (same order
    as the table: the key bar's order) first, then the aliases, which must not take the key bar's place."""
    rows = [row.bindings() for row in table]
    out: list[BindingType] = [r[0] for r in rows]
    return out + [b for r in rows for b in r[1:]]


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def help_lines(crawl: Crawl | None, table: tuple[Action, ...] = ACTIONS,
               nav: tuple[tuple[str, str], ...] = NAV_KEYS) -> list[tuple[str, str]]:
    """(key, what it does) for the help screen: every action this crawl has (all of the
    table's for the dashboard, crawl None), then the rest."""
    rows = [row for row in table if crawl is None or row.applies(crawl)]
    lines = [(row.shown_key, _lower(row.description)) for row in rows] + list(nav)
    aliased = [row for row in rows if row.aliases]
    if aliased:
        keys = " ".join(format_key(key) for row in aliased for key in row.aliases)
        targets = " ".join(row.shown_key for row in aliased)
        lines.append((keys, f"same as {targets} (for keyboards where + needs shift)"))
    return lines


def palette(crawl: Crawl) -> Iterator[Action]:
    """The rows the command palette may offer (check_action decides which it does)."""
    return (row for row in ACTIONS if row.applies(crawl))


TOP_NAV: tuple[tuple[str, str], ...] = (
    ("↑ ↓ pgup pgdn", "move the selection (home, end too)"),
    ("ctrl+p", "command palette: every action by name"),
    ("escape", "clear the filter, close a prompt or help"),
)
