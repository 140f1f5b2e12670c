"""`Item`: one queued URL, as every frontier, host queue and worker passes it around.

Its own module so the host queues (core/queueing/hosts.py) and the frontiers that hold them
(core/queueing/frontier.py, core/cluster/) import it without importing each other."""
from __future__ import annotations

from typing import NamedTuple


class Item(NamedTuple):
    url: str
    redirects_left: int
    depth: int
    tries: int = 0  # tries already spent (a cancelled worker's URL comes back with +1)
    # Provenance (core/output/provenance.py): the parent's own URL string (shared, not copied)
    # and an interned hop path. Defaults keep old 4-field items valid.
    via: str | None = None
    discovery: str = ""
