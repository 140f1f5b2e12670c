"""The main screen's key actions, one row each, and the dashboard's (TOP_OWN, and TOP_SHARED of
the main screen's): the bindings, the key bar, the help screen, the command palette and the
key reference (docs/reference/keys.md) are all read from these tables, so they say the same thing.

A row's `label` is the key bar's word, `title` names the action in the palette (it has to
read on its own there), and `description` is what the help screen, the palette and the
binding's tooltip say. `when` says whether the action exists at all for this kind of crawl;
`enabled` whether it can run right now, in code and in words, side by side so the reference
can't say other than the key does (`CrawlApp.check_action` and `TopApp.check_action` only look it up).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

from textual.actions import parse
from textual.binding import Binding, BindingType
from textual.keys import format_key

from .panels.summary import SummaryScreen
from .screens.dialogs import ErrorListScreen, MergeListScreen
from .screens.queues import QueuesScreen
from .screens.steer import IgnoresScreen, QueueScreen, TextPrompt

CONC = Binding.Group("conc", compact=False)  # the concurrency steps, kept together

# "remote": only a monitor of a crawl in another process (core/sockets/client.py); "cluster": only a
# crawl shared through Redis (core/cluster/view.py); "list": only a monitor opened from the
# dashboard (`crawltop` alone, tui/top/), which esc takes back to the list.
When = Literal["always", "remote", "cluster", "list"]
WHEN_WORDS: dict[When, str] = {  # the key reference says them
    "always": "",
    "remote": "only in a monitor of a crawl in another process (attach, or one the dashboard opened)",
    "cluster": "only for a crawl shared through Redis",
    "list": "only in a monitor opened from the dashboard",
}


class Crawl(Protocol):
    """What `when` is decided on (CrawlApp has both)."""

    @property
    def can_detach(self) -> bool: ...  # a monitor of a crawl in another process

    @property
    def cluster(self) -> bool: ...  # a crawl shared through Redis

    @property
    def from_list(self) -> bool: ...  # opened from the dashboard


class Now(Crawl, Protocol):
    """What `enabled` is decided on, read when Textual asks (CrawlApp is one). Properties, not
    a copy: Textual may ask before the panels are composed, and each predicate reads only its own."""

    @property
    def live(self) -> bool: ...  # running or paused: not starting to stop, not ended

    @property
    def paused(self) -> bool: ...  # the whole crawl

    @property
    def concurrency(self) -> int: ...  # workers

    @property
    def finished(self) -> bool: ...  # the crawl ended and its summary was shown

    @property
    def looking_at(self) -> object: ...  # the screen the person looks at (under the command palette)

    @property
    def on_main(self) -> bool: ...  # that is the main screen

    @property
    def focus(self) -> str | None: ...  # the main screen's panel with the keyboard: workers, hosts, processes


class Listing(Protocol):
    """What the dashboard's `enabled` is decided on (TopApp is one): the list and its selected crawl."""

    @property
    def typing_filter(self) -> bool: ...  # the filter line has the keyboard

    @property
    def selected_live(self) -> bool: ...  # running or paused, and this dashboard can reach it

    @property
    def selected_paused(self) -> bool: ...

    @property
    def selected_workers(self) -> int | None: ...  # None until its first summary

    @property
    def selected_shared(self) -> bool: ...  # a crawl shared through Redis

    @property
    def selected_ended(self) -> bool: ...

    @property
    def any_ended(self) -> bool: ...  # on the list, rows the filter hides too

    @property
    def can_start(self) -> bool: ...  # n is on: not `crawltop top --no-start`


S = TypeVar("S")  # what a predicate reads: Now (the monitor) or Listing (the dashboard)


@dataclass(frozen=True)
class Enabled(Generic[S]):
    """Whether an action can run now: `test` for the app (None: shown greyed out, as Textual
    takes it), `words` for the key reference, so the two sit together and change together."""

    words: str  # completes "available …" in the reference
    test: Callable[[S], bool | None]

    def __call__(self, now: S) -> bool | None:
        return self.test(now)


def _unless(screen: type, words: str) -> Enabled[Now]:
    """The key that opens a screen does nothing on that screen itself."""
    return Enabled(f"unless {words} is already open", lambda now: not isinstance(now.looking_at, screen))


def _fewer(now: Now) -> bool | None:
    if not (now.live and now.on_main):
        return False
    return None if now.concurrency <= 1 else True  # greyed out, not gone: the key exists, one worker is the floor


ALWAYS: Enabled[Any] = Enabled("always", lambda now: True)
# Predicates shared by more than one row: rows running the same action must agree (Textual asks by action).
RUNNING_ON_MAIN: Enabled[Now] = Enabled("while the crawl runs, on the main screen",
                                        lambda now: now.live and now.on_main)
FEWER: Enabled[Now] = Enabled("while the crawl runs, on the main screen; greyed out at one worker", _fewer)
PROMPT: Enabled[Now] = Enabled("while the crawl runs, unless a prompt is open",
                               lambda now: now.live and not isinstance(now.looking_at, TextPrompt))
HOSTS_FOCUSED: Enabled[Now] = Enabled("while the crawl runs, with the hosts panel focused on the main screen",
                                      lambda now: now.live and now.on_main and now.focus == "hosts")
PROCESSES_FOCUSED: Enabled[Now] = Enabled("while the crawl runs, with the processes panel focused on the main screen",
                                          lambda now: now.live and now.on_main and now.focus == "processes")


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
    enabled: Enabled[Any] = field(default=ALWAYS, compare=False)  # Enabled[Now], or Enabled[Listing] on the dashboard

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
           "Pause the crawl: no new fetches; those in flight finish",
           enabled=Enabled("while the crawl runs, not paused", lambda now: now.live and not now.paused)),
    Action("resume", "p", "resume", "Resume", "Resume crawl", "Resume the crawl: workers take URLs again",
           enabled=Enabled("while the crawl is paused", lambda now: now.live and now.paused)),
    Action("more", "plus", "more(1)", "+1", "Concurrency +1", "One more worker",
           display="+", aliases=("equals_sign",), group=CONC, enabled=RUNNING_ON_MAIN),
    Action("fewer", "minus", "fewer(1)", "-1", "Concurrency -1", "One worker fewer (it retires after its URL)",
           display="-", group=CONC, enabled=FEWER),
    Action("more10", "right_square_bracket", "more(10)", "+10", "Concurrency +10", "Ten more workers",
           display="]", aliases=("greater_than_sign",), group=CONC, enabled=RUNNING_ON_MAIN),
    Action("fewer10", "left_square_bracket", "fewer(10)", "-10", "Concurrency -10", "Ten workers fewer",
           display="[", aliases=("less_than_sign",), group=CONC, enabled=FEWER),
    Action("concurrency", "c", "set_concurrency", "Set", "Set concurrency…", "Type a number of workers",
           enabled=RUNNING_ON_MAIN),
    Action("cancel-worker", "x", "cancel_worker", "Cancel", "Cancel selected worker",
           "Cancel the selected worker; its URL is re-queued",
           # only while the workers panel has the keyboard: the selection is visible there
           enabled=Enabled("while the crawl runs, with the workers panel focused on the main screen",
                           lambda now: now.live and now.on_main and now.focus == "workers")),
    Action("errors", "e", "errors", "Errors", "Error list", "Full error list, filterable",
           enabled=_unless(ErrorListScreen, "the error list")),
    Action("merges", "r", "merges", "Merges", "Redirect merges", "Redirect merges and redirects, filterable",
           enabled=_unless(MergeListScreen, "the merge list")),
    Action("summary", "s", "summary", "Summary", "Summary", "Summary of the finished crawl",
           enabled=Enabled("once the crawl has ended, unless the summary is already open",
                           lambda now: now.finished and not isinstance(now.looking_at, SummaryScreen))),
    Action("help", "question_mark", "help", "Help", "Help: keys", "Every key", display="?"),
    # Steering (core/steering/steer.py, tui/steering.py): in the help screen and the palette, not the key bar.
    Action("queue", "u", "queue", "Queue", "Queue view", "Queue view: top prefixes, growth, traps, next URLs",
           show=False, enabled=_unless(QueueScreen, "the queue view")),
    Action("queues", "H", "queues", "Host queues", "Host queues",
           "Host queues: every host's state, queue, delay; sort, filter", display="H", show=False,
           enabled=_unless(QueuesScreen, "the host queues view")),
    Action("ignore", "i", "ignore", "Ignore", "Ignore URLs…",
           "Add an ignore regex (on the full URL); matching queued URLs are dropped", show=False, enabled=PROMPT),
    Action("ignores", "I", "ignores", "Ignores", "Ignore patterns",
           "Ignore patterns: what each dropped and stopped; delete one", display="I", show=False,
           enabled=_unless(IgnoresScreen, "the ignore patterns view")),
    Action("add-seed", "a", "add_seed", "Add URL", "Add a URL…", "Add a URL to the crawl (a new seed)", show=False,
           enabled=PROMPT),
    Action("host-pause", "h", "toggle_host", "Pause host", "Pause / resume selected host",
           "In the hosts panel: pause / resume the selected host", show=False, enabled=HOSTS_FOCUSED),
    Action("host-delay", "t", "host_delay", "Host delay", "Set selected host's delay…",
           "In the hosts panel: set the selected host's delay", show=False, enabled=HOSTS_FOCUSED),
    # A shared crawl (core/cluster/view.py): the selected row of the processes panel.
    Action("process-pause", "P", "process('pause')", "Pause process", "Pause selected process",
           "In the processes panel: pause the selected process", display="P", show=False, when="cluster",
           enabled=PROCESSES_FOCUSED),
    Action("process-resume", "R", "process('resume')", "Resume process", "Resume selected process",
           "In the processes panel: resume the selected process", display="R", show=False, when="cluster",
           enabled=PROCESSES_FOCUSED),
    Action("process-stop", "K", "process('stop')", "Stop process", "Stop selected process",
           "In the processes panel: stop the selected process (its URLs go back)", display="K", show=False,
           when="cluster", enabled=PROCESSES_FOCUSED),
    Action("quit", "q", "quit", "Quit", "Quit crawltop", "Quit; asks first while the crawl runs",
           urgent=("ctrl+c", "ctrl+q")),
    Action("detach", "d", "detach", "Detach", "Detach",
           "Close this monitor; the crawl goes on (attached monitors only)", when="remote",
           # an ended crawl's monitor has nothing to leave running, but from the dashboard d goes back
           enabled=Enabled("while the crawl runs; after it ended too when opened from the dashboard",
                           lambda now: now.can_detach and (not now.finished or now.from_list))),
    Action("back", "escape", "to_list", "Back", "Back to the list",
           "Back to the list of crawls; this one goes on", display="esc", when="list",
           enabled=Enabled("only in a monitor opened from the dashboard", lambda now: now.from_list)),
)

# What check_action looks up: Textual asks by action name, and rows of one name share a predicate.
ENABLED: dict[str, Enabled[Now]] = {row.name: row.enabled for row in ACTIONS}

# The dashboard (`crawltop` alone, tui/top/): the keys that act on the selected crawl are the
# main screen's own rows (the same words), then the dashboard's. When each runs is the dashboard's
# own: it reads the list and its selected crawl (`Listing`), TopApp.check_action only looks it up.


def _listed(words: str, test: Callable[[Listing], bool | None]) -> Enabled[Listing]:
    """A dashboard key that rests while the filter line has the keyboard: what is typed there is
    the filter, so the key bar and the palette offer only sort, help and quit."""
    return Enabled(f"{words}; not while typing the filter",
                   lambda top: False if top.typing_filter else test(top))


def _top_fewer(top: Listing) -> bool | None:
    if not top.selected_live:
        return False
    workers = top.selected_workers
    return None if workers is None or workers <= 1 else True  # greyed out, as in the monitor


TOP_RUNS = _listed("while the selected crawl runs", lambda top: top.selected_live)
TOP_FEWER = _listed("while the selected crawl runs; greyed out at one worker", _top_fewer)
# The main screen's rows on the dashboard, each with the dashboard's predicate.
TOP_SHARED: dict[str, Enabled[Listing]] = {
    "pause": _listed("while the selected crawl runs, not paused",
                     lambda top: top.selected_live and not top.selected_paused),
    "resume": _listed("while the selected crawl is paused", lambda top: top.selected_live and top.selected_paused),
    "more": TOP_RUNS,
    "fewer": TOP_FEWER,
    "more10": TOP_RUNS,
    "fewer10": TOP_FEWER,
    # a shared crawl's ignores are its processes': i in its monitor (enter, then i)
    "ignore": _listed("while the selected crawl runs, unless it is shared through Redis (then i in its monitor)",
                      lambda top: top.selected_live and not top.selected_shared),
}
TOP_OWN: tuple[Action, ...] = (
    Action("open", "enter", "open", "Open", "Open selected crawl",
           "Open the selected crawl's monitor (esc or d comes back to the list)", enabled=TOP_RUNS),
    Action("stop", "k", "stop", "Stop", "Stop selected crawl…",
           "Stop the selected crawl (asks first): in-flight work is put back, records flushed", enabled=TOP_RUNS),
    Action("new", "n", "new", "New", "Start a crawl…",
           "Start a crawl, detached: a URL and options as on the command line",
           enabled=_listed("unless the dashboard runs with --no-start (as web --all does without --allow-start)",
                           lambda top: top.can_start)),
    Action("dismiss", "x", "dismiss", "Dismiss", "Dismiss ended crawl",
           "Remove the selected ended crawl from the list",
           enabled=_listed("while the selected crawl has ended", lambda top: top.selected_ended)),
    # sort still runs while the filter is typed (from the palette: the key types an o)
    Action("sort", "o", "sort(1)", "Sort", "Next sort order",
           "Sort by the next column: name, state, pages, rate, queued, failed, elapsed (O: back)"),
    Action("sort-back", "O", "sort(-1)", "Sort back", "Previous sort order", "Sort by the previous column",
           display="O", show=False),
    Action("filter", "slash", "filter", "Filter", "Filter crawls…", "Type to filter by name, state or root",
           display="/", enabled=Enabled("unless the filter line already has the keyboard",
                                        lambda top: not top.typing_filter)),
    # after the others: the first a narrow key bar cuts (help and the palette have it)
    Action("dismiss-all", "X", "dismiss_all", "Dismiss all", "Dismiss all ended crawls…",
           "Remove every ended crawl from the list, for every dashboard (asks first)", display="X",
           enabled=_listed("while a crawl on the list has ended (one the filter hides too)",
                           lambda top: top.any_ended)),
    Action("help", "question_mark", "help", "Help", "Help: keys", "Every key", display="?"),
    Action("quit", "q", "quit", "Quit", "Quit crawltop", "Quit the dashboard; the crawls go on",
           urgent=("ctrl+c", "ctrl+q")),
)


TOP_QUIET = ("more10", "fewer10")  # on the dashboard, out of the key bar (80 columns hold the rest)


def top_actions() -> tuple[Action, ...]:
    """The dashboard's rows, in the key bar's order: open, the shared ones (with the dashboard's
    predicates), then its own."""
    shared = tuple(replace(row, show=row.show and row.id not in TOP_QUIET, enabled=TOP_SHARED[row.id])
                   for row in ACTIONS if row.id in TOP_SHARED)
    return (TOP_OWN[0], *shared, *TOP_OWN[1:])


# What TopApp.check_action looks up, as ENABLED for the main screen.
TOP_ENABLED: dict[str, Enabled[Listing]] = {row.name: row.enabled for row in top_actions()}

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
