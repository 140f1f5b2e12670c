"""Widgets the panels are built from: a diffed keyed table, an append-only log table,
a line that repaints only when it changed."""
