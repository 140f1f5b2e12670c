"""What a URL leaves behind: one Record per URL and the sinks that keep it (JSON lines,
WARC), with its provenance (hop path, fetch time, digests)."""
