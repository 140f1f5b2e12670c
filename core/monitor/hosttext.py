"""A host queue's row as words: shared by the TUI's hosts panel and queues view and by
`crawltop ctl NAME hosts`, so a script reads the same table a person sees.

Pure functions of a `HostView` (core/monitor/stats.py); no Textual, no Rich. Host names come from
servers and links: callers show them as plain text (core/monitor/sanitize.py), never as markup.
"""
from __future__ import annotations

from .stats import HostView

# The header and the filter name states as core/queueing/hosts.py STATES does; these are the words.
STATE_WORDS = {"backoff": "backing off", "budget": "over budget"}
SHORT_REASON = {"connect": "conn", "timeout": "tmout"}  # a state column is 9-16 cells


def secs(value: float) -> str:
    """Seconds left, short: 0.3s, 12s, 4m05s."""
    if value < 10:
        return f"{value:.1f}s"
    if value < 600:
        return f"{value:.0f}s"
    m, s = divmod(int(value), 60)
    return f"{m}m{s:02d}s"


def state_text(h: HostView, *, short: bool = False) -> str:
    """'waiting 0.3s', 'backoff 429 12s', 'fetching', ... ('' for a store without states).
    `short` drops the state's name where the seconds say it (the side panel)."""
    state = h.state
    if state == "waiting":
        return f"wait {secs(h.wait)}" if short else f"waiting {secs(h.wait)}"
    if state == "backoff":
        why = SHORT_REASON.get(h.why, h.why)
        words = [] if short and why else ["backoff"]
        return " ".join([*words, *([why] if why else []), secs(h.wait)])
    if state == "fetching":
        return "fetch" if short else ("fetching" + (f" ×{h.in_flight}" if h.in_flight > 1 else ""))
    if state == "budget":
        return "budget" if short else "over budget"
    return state


def delay_text(h: HostView, *, source: bool = False) -> str:
    """'0.25s', or with its source '0.25s robots' ('' when no delay applies)."""
    if not h.delay:
        return ""
    text = f"{h.delay:g}s"
    return f"{text} {h.source}" if source and h.source else text

