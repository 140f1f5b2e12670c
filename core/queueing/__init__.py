"""Where a URL waits: the frontier, its per-host queues and ready order, scope, the seen set.

A link enters here (scope, seen), waits in its host's queue, and comes out only when its
host is due (`frontier.py` `pop()`, `hosts.py` `Hosts.take()`)."""
