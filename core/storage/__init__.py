"""The state file (`--state`): a crash-safe SQLite frontier and record store, its
format, its writer thread, `open_state()` (create or resume) and exports."""
