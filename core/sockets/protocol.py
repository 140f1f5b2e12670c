"""The control protocol, version 1: every message a crawl's socket speaks, in one place.

Framing: JSON lines. Each message is one JSON object (UTF-8, compact) ending in "\\n".
A client's message may be at most MAX_REQUEST bytes (64 KiB) with its newline; a longer
one gets an error reply and the connection is closed. Replies may be larger (a first
snapshot carries the event rings) and are capped at MAX_REPLY on the client side.

Client -> crawl (requests; `id` is the client's, echoed in the reply):
  {"op": "hello", "id": 0, "protocol": 1, "version": "0.1.0", "client": "crawltop top"}
                                                                 must come first; `client` (optional)
                                                                 names who asks: a stop is put to it
  {"op": "summary", "id": n}                                     O(1): the dashboard's row
  {"op": "snapshot", "id": n, "since": {"recent_errors": seq, ...}, "workers": max_rows}
  {"op": "status", "id": n}                                      the headline, for ls/ctl
  {"op": COMMAND, "id": n, "args": {...}}                        one of COMMANDS below

Crawl -> client:
  {"id": n, "ok": true, "result": ...}       hello: protocol, version, name, pid, started,
                                             roots, commands, state, paused, concurrency;
                                             snapshot: encode_snapshot();
                                             summary: core/monitor/summary.py Summary's
                                             fields + name, pid, started, root, paused, mode;
                                             status: HEADLINE fields + name, pid, started
                                             (epoch s), root, clients (connections now),
                                             mode ("tui" | "headless" | "detached" |
                                             "stopping": where its screen is, `ls` MODE);
                                             a command: {"result": its return value,
                                             "state", "paused", "concurrency"}
  {"id": n, "ok": false, "error": "one line"}  garbage, unknown op, bad args, wrong protocol
  {"event": "bye", "reason": "ended" | "failed", "snapshot": {...},
   "top_error_urls": [[url, tries], ...]}    sent once to every client as the crawl ends,
                                             then the socket closes. A connection that drops
                                             without a bye means the crawl process died.

Snapshots are encoded generically from core/monitor/stats.py `Snapshot`'s dataclass fields
(see "the generic dataclass codec" below), so a field added there reaches every monitor
without an edit here. Adding a command is one COMMANDS entry (see the comment there).
"""
from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections import deque
from functools import cache
from typing import Any, NamedTuple

from ..errors import ProtocolError
from ..jsonfast import DecodeError, loads
from ..monitor.stats import RING, Snapshot
from .blocking import MAX_REPLY as MAX_REPLY  # the framing, shared with the blocking client
from .blocking import PROTOCOL as PROTOCOL
from .blocking import encode as encode

MAX_REQUEST = 64 * 1024


class Command(NamedTuple):
    target: str  # attribute path on the engine: "pause", "stats.top_error_urls", "parts.steer.add_seed"
    args: tuple[tuple[str, type], ...] = ()
    steers: bool = True  # changes the crawl (a read-only query says False)
    optional: tuple[str, ...] = ()  # args that may be left out (or null): the method's default then


# Adding a command is one entry: the name on the wire, the Crawler attribute it calls (a
# dotted path), and its arguments with their types (those named `optional` may be left out
# or null, and the method's default applies).
COMMANDS: dict[str, Command] = {
    "pause": Command("pause"),
    "resume": Command("resume"),
    "stop": Command("stop"),
    "set_concurrency": Command("set_concurrency", (("n", int),)),
    "cancel_worker": Command("cancel_worker", (("worker_id", int),)),
    "top_error_urls": Command("stats.top_error_urls", (("n", int),), steers=False),
    # Steering: the parts the engine declares (core/surface.py Parts; a Crawler's are its
    # core/steering/steer.py). add_ignore is a coroutine: the server awaits it. Results that
    # are dataclasses (IgnoreResult, SeedResult, IgnoreView) travel as objects.
    "ignore_add": Command("parts.ignoring.add_ignore", (("pattern", str),)),
    "ignore_remove": Command("parts.ignoring.remove_ignore", (("pattern", str),)),
    "ignores": Command("parts.steer.ignores", steers=False),
    "ignore_set": Command("parts.steer.set_ignore_set", (("name", str), ("on", bool))),  # a coroutine
    "ignore_sets": Command("parts.steer.ignore_sets", steers=False),
    "seed_add": Command("parts.steer.add_seed", (("url", str),)),
    "host_pause": Command("parts.steer.pause_host", (("host", str),)),
    "host_resume": Command("parts.steer.resume_host", (("host", str),)),
    "host_delay": Command("parts.steer.set_host_delay", (("host", str), ("seconds", float))),
    # The queues view and `ctl hosts`: HostView rows, sorted and filtered by the engine.
    "hosts": Command("parts.host_table.host_table", (("sort", str), ("state", str), ("limit", int)), steers=False,
                     optional=("sort", "state", "limit")),
}

# errors: the failed URLs (core/outcomes.py); skipped and cancelled are counted apart, and
# outcomes holds all five (fetched, redirected, failed, skipped, cancelled). requisites and
# externals are counted beside pages (core/queueing/kinds.py). browser: with --browser,
# Chromium's memory (bytes), its --browser-memory and its restarts; else null.
HEADLINE = ("state", "paused", "pages", "requisites", "externals", "records", "queued", "seen", "errors", "skipped",
            "cancelled", "outcomes", "fetched_classes", "rate_now", "rate_avg",
            "concurrency", "busy", "elapsed", "sitemap_probes", "sitemap_found", "browser")


# -- framing -------------------------------------------------------------------------
def decode(line: bytes) -> dict[str, Any]:
    """One received line -> its object; ProtocolError for anything else."""
    try:
        message = loads(line)
    except (UnicodeDecodeError, DecodeError) as exc:
        raise ProtocolError(f"not a JSON line: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def check_args(name: str, raw: Any) -> dict[str, Any]:
    """The arguments of a command, checked against its table entry."""
    command = COMMANDS.get(name)
    if command is None:
        raise ProtocolError(f"unknown command {name!r}")
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ProtocolError(f"{name}: args must be an object")
    extra = set(raw) - {a for a, _ in command.args}
    if extra:
        raise ProtocolError(f"{name}: unexpected argument {sorted(extra)[0]!r}")
    out = {}
    for arg, kind in command.args:
        value = raw.get(arg)
        if value is None and arg in command.optional:
            continue
        if type(value) is not kind:  # bool is not an int here
            raise ProtocolError(f"{name}: argument {arg!r} must be {kind.__name__}")
        out[arg] = value
    return out


# -- the generic dataclass codec --------------------------------------------------------
# A dataclass becomes an object of its fields; a tuple of dataclasses becomes columns
# {"c": [field names], "r": [[values]]}, where a string that shares more than 5 leading
# characters with the one above it in its column travels as [shared, rest]; floats are
# rounded to the millisecond. Rings of events (tuples of dataclasses with a `seq` field)
# are sent incrementally: only events newer than the client's `since[field]`, and the
# client keeps its own bounded copy. A client may ask for at most `workers` worker rows.


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _is_dataclass(value: Any) -> bool:
    """dataclasses.is_dataclass as a plain bool: the codec works on Any, and the narrowed
    types (an instance or a class) would only get in its way."""
    return dataclasses.is_dataclass(value)


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if _is_dataclass(value):
        return {name: _plain(getattr(value, name)) for name in _fields(type(value))}  # type: ignore[arg-type]  # type[Any] is hashable; mypy says not
    if isinstance(value, (tuple, list)):
        if value and _is_dataclass(value[0]):
            names = _fields(type(value[0]))  # type: ignore[arg-type]  # (same)
            rows = [[_plain(getattr(v, n)) for n in names] for v in value]
            _front_code(rows)
            return {"c": names, "r": rows}
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _front_code(rows: list[list[Any]]) -> None:
    """Strings in a column share their start with the row above (URLs of one host, one
    phase): send [shared length, rest] when that saves bytes."""
    prev: dict[int, str] = {}
    for row in rows:
        for i, v in enumerate(row):
            if not isinstance(v, str):
                continue
            p = prev.get(i)
            prev[i] = v
            if p:
                k = len(os.path.commonprefix((p, v)))
                if k > 5:
                    row[i] = [k, v[k:]]


def _front_decode(rows: list[list[Any]]) -> list[list[Any]]:
    prev: dict[int, str] = {}
    out = []
    for row in rows:
        row = list(row)
        for i, v in enumerate(row):
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], str):
                v = row[i] = prev.get(i, "")[: v[0]] + v[1]
            if isinstance(v, str):
                prev[i] = v
        out.append(row)
    return out


def _ring_item(hint: Any) -> type | None:
    """The dataclass of a `tuple[X, ...]` whose X has a seq: a ring sent incrementally."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis and _is_dataclass(args[0]):
            if "seq" in _fields(args[0]):
                return args[0]
    return None


def rings() -> tuple[str, ...]:
    """Snapshot fields sent incrementally."""
    return tuple(n for n, h in _hints(Snapshot).items() if _ring_item(h) is not None)


def encode_snapshot(snap: Snapshot, since: dict[str, int] | None = None, workers: int | None = None) -> dict[str, Any]:
    """A snapshot as JSON-ready data; rings only past `since`, at most `workers` worker rows."""
    since = since or {}
    ring_fields = set(rings())
    out: dict[str, Any] = {}
    for name in _fields(Snapshot):
        value = getattr(snap, name)
        if name in ring_fields:
            last = since.get(name, -1)
            value = tuple(e for e in value if e.seq > last) if last >= 0 else value
        elif name == "workers" and workers is not None:
            value = value[:max(0, workers)]
        out[name] = _plain(value)
    return out


def _build(hint: Any, data: Any) -> Any:
    origin = typing.get_origin(hint)
    if data is None:
        return None
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        return _build(members[0], data) if len(members) == 1 else data
    if _is_dataclass(hint):
        return _dataclass(hint, data)
    if origin is tuple:
        args = typing.get_args(hint)
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
        if isinstance(data, dict) and "c" in data:  # columns of a dataclass
            names = data["c"]
            return tuple(_dataclass(item, dict(zip(names, row, strict=False))) for row in _front_decode(data["r"]))
        return tuple(_build(item, v) for v in data)
    if origin is dict:
        key, val = typing.get_args(hint)
        return {(int(k) if key is int else k): _build(val, v) for k, v in data.items()}
    if hint is float and isinstance(data, int):
        return float(data)
    return data


def _dataclass(cls: type, data: dict[str, Any]) -> Any:
    hints = _hints(cls)
    kwargs = {name: _build(hints[name], data[name]) for name in _fields(cls) if name in data}
    return cls(**kwargs)  # a field the other side lacks keeps its default (or fails loudly)


class SnapshotDecoder:
    """Rebuilds Snapshots on the client, keeping its own bounded copy of each ring."""

    def __init__(self) -> None:
        self.rings: dict[str, deque[Any]] = {name: deque(maxlen=RING) for name in rings()}

    def since(self) -> dict[str, int]:
        return {name: ring[-1].seq for name, ring in self.rings.items() if ring}

    def decode(self, data: dict[str, Any]) -> Snapshot:
        hints = _hints(Snapshot)
        kwargs: dict[str, Any] = {}
        for name in _fields(Snapshot):
            if name not in data:
                continue
            value = _build(hints[name], data[name])
            ring = self.rings.get(name)
            if ring is not None:
                last = ring[-1].seq if ring else -1
                ring.extend(e for e in value if e.seq > last)
                value = tuple(ring)
            kwargs[name] = value
        return Snapshot(**kwargs)


def headline(snap: Snapshot, paused: bool) -> dict[str, Any]:
    """The `status` reply: the numbers a script or `ls` wants, flat."""
    out = {name: _plain(getattr(snap, name)) for name in HEADLINE if name != "paused"}
    out["paused"] = paused
    return out
