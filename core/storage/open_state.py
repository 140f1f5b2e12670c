"""`open_state()`: the one call the CLI makes to create a crawl's state file or resume it."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..config import CrawlConfig
from ..errors import StateError
from .schema import STATUS_RUNNING, config_to_json
from .store import SqliteStore


def open_state(
    path: str,
    config: CrawlConfig | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    resume_only: bool = False,
) -> tuple[CrawlConfig, SqliteStore]:
    """Create or resume the crawl state at `path`.

    - New file (missing or empty): `config` is required; it is saved with `overrides` applied.
    - Existing file: the saved config, then the concurrency and paused flag saved at the
      last stop (`start_paused`), then `overrides` (only what the user set explicitly on
      the command line) win.  `config` is ignored, except that its roots are added to
      the saved ones when they differ (the caller adds them; already-seen roots are no-ops).
    - `resume_only`: a missing file is an error rather than a new crawl.

    Returns the effective config and the open store.  Check `store.finished` (nothing
    to do), `store.resumed` and `store.resumed_records`.  Raises StateError.
    """
    overrides = dict(overrides or {})
    if config is not None and overrides:
        config = dataclasses.replace(config, **overrides)
    initial = {"config": config_to_json(config)} if config is not None else None
    store = SqliteStore.open(path, create=not resume_only and config is not None, settings=initial)
    try:
        if store.resumed:
            saved = store.config
            if saved is None:
                raise StateError(f"{path}: corrupt state file (no saved config)")
            session: dict[str, Any] = {}
            if "concurrency" in store.settings:
                session["concurrency"] = int(store.settings["concurrency"])
            if "paused" in store.settings:
                session["start_paused"] = bool(store.settings["paused"])
            if config is not None and "roots" not in overrides:
                extra = tuple(r for r in config.roots if r not in saved.roots)
                if extra:
                    session["roots"] = saved.roots + extra
            effective = dataclasses.replace(saved, **{**session, **overrides})
        else:
            assert config is not None
            effective = config
        if not store.finished:
            store.save_config(effective)
            store.set_setting("status", STATUS_RUNNING)
            store.flush()
    except BaseException:
        store.close()
        raise
    return effective, store
