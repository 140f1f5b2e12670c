"""What each process of a shared crawl says about itself, and what a monitor shows of it."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class ProcessInfo:
    """Written by a process's heartbeat into the crawl's `procs` hash (JSON)."""
    host: str
    pid: int
    state: str  # the Stats state: RUNNING, PAUSED, STOPPING, DONE, REDIS DOWN
    workers: int
    busy: int
    pages: int
    rate: float  # pages/s now
    # --browser: its Chromium's memory (bytes), --browser-memory and restarts, as a Summary
    # carries them (core/monitor/summary.py browser_numbers); None without a browser
    browser: dict[str, int] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> ProcessInfo:
        """Fields this version does not know (a newer engine's) are left out."""
        return cls(**{k: v for k, v in json.loads(raw).items() if k in _FIELDS})


@dataclass(frozen=True)
class ProcessRow:
    """One row of the processes panel."""
    proc: str  # host:pid:random
    info: ProcessInfo
    beat_age: float  # seconds since its last heartbeat (server clock)
    lost: bool  # no heartbeat for longer than a lease: its leases are running out
    leases: int  # URLs it holds
    lease_left: float | None  # seconds until its earliest lease expires (None: holds none)


_FIELDS = frozenset(f.name for f in fields(ProcessInfo))
