"""What a fetched page yields: canonical links (`urls.py`), and the memory care of
large pages (`defuse.py` before the parse, `malloc.py` after it)."""
