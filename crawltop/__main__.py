"""`python -m crawltop ...` is the `crawltop` command."""
from .cli import console

console()
