"""A live crawl's control socket: the protocol (JSON lines), the server on the engine's
loop, the clients (TUI, ctl, ls) and the run directory where sockets live."""
