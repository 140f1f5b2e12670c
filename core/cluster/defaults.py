"""Defaults of a shared crawl that the command line shows in its help."""
from __future__ import annotations

# Partitions of a new crawl on a Redis Cluster (one server: 1). Enough that each of a few
# dozen masters gets several (their slots spread them), few enough that an idle process's
# sweep over all of them every couple of seconds stays cheap (docs/scaling.md).
DEFAULT_CLUSTER_PARTITIONS = 64
