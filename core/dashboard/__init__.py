"""The dashboard's model: every crawl's row, from the run directory and Redis."""
