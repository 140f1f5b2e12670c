"""The dashboard's model (issue 30): every crawl's row, from the run directory and Redis."""
