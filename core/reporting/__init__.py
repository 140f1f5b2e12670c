"""`crawltop report`: what a finished crawl's records say (`linkcheck.py`), in five
formats (`formats.py`)."""
