"""`python -m crawltop.cli ...` is the `crawltop` command."""
from .main import console

console()
