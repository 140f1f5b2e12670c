"""The subcommands of `crawltop`, one module each: its parser (`add_parser`) and its run
(`run`). cli/main.py builds the parser from them and dispatches; they use the helpers
beside cli/main.py and never import it."""
