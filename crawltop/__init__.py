"""crawltop: htop for a web crawler.

One import package mapped from the repository's folders (see pyproject.toml):
`crawltop.core` the engine (never imports Textual), `crawltop.tui` the Textual app,
`crawltop.cli` the command line, `crawltop.demo` the bundled demo site.
"""
__version__ = "0.1.0"
