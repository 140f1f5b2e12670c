"""The `crawltop` command line: subcommands, options and the headless runner."""
from .main import console, main

__all__ = ["console", "main"]
