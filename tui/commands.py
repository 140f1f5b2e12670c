"""Command palette entries for every key action (ctrl+p)."""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

# (action, title, help); the same actions the keys run.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("pause", "Pause crawl", "No worker takes a new URL; fetches in flight finish (p)"),
    ("resume", "Resume crawl", "Workers take URLs again (p)"),
    ("more(1)", "Concurrency +1", "Start one more worker (+)"),
    ("fewer(1)", "Concurrency -1", "Retire one worker after its current URL (-)"),
    ("more(10)", "Concurrency +10", "Start ten more workers (])"),
    ("fewer(10)", "Concurrency -10", "Retire ten workers after their current URL ([)"),
    ("set_concurrency", "Set concurrency…", "Type a number of workers (c)"),
    ("cancel_worker", "Cancel selected worker", "Cancel its fetch; its URL goes back on the queue (x)"),
    ("errors", "Error list", "All recent errors, filterable (e)"),
    ("merges", "Redirect merges", "Redirects whose target was already seen, filterable (r)"),
    ("summary", "Summary", "Totals, rates and top errors of the finished crawl (s)"),
    ("queue", "Queue view", "Top URL prefixes in the queue, growth, suspected traps, next URLs (u)"),
    ("queues", "Host queues", "Every host's queue: state, queued, delay, errors; sort, filter by state (H)"),
    ("ignore", "Ignore URLs…", "Add an ignore regex; matching queued URLs are dropped at once (i)"),
    ("ignores", "Ignore patterns", "Each pattern with what it dropped and stopped; delete one (I)"),
    ("add_seed", "Add a URL…", "Add a seed URL to the running crawl (a)"),
    ("toggle_host", "Pause / resume selected host", "Its URLs wait, others go on (h, hosts panel)"),
    ("host_delay", "Set selected host's delay…", "Minimum gap between fetches from that host (t, hosts panel)"),
    ("help", "Help: keys", "Every key crawltop knows (?)"),
    ("quit", "Quit crawltop", "Asks first while the crawl runs, then stops it cleanly (q)"),
)


def _action_name(action: str) -> tuple[str, tuple[object, ...]]:
    if "(" in action:
        name, _, arg = action.partition("(")
        return name, (int(arg.rstrip(")")),)
    return action, ()


class CrawlCommands(Provider):
    """Offers each action only when it applies (the same check the key bar uses)."""

    def _available(self):
        app = self.app
        for action, title, help_text in COMMANDS:
            name, params = _action_name(action)
            if app.check_action(name, params):
                yield title, partial(app.run_action, action), help_text

    async def discover(self) -> Hits:
        for title, callback, help_text in self._available():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
