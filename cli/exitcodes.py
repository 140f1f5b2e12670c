"""The exit codes of the commands that crawl: one table, shown by `crawl --help` and the
README, used by cli/headless.py. No imports: `--help` stays fast."""

# Exit codes of the commands that crawl (README "Exit codes", --help): one table.
EXIT_OK = 0  # the crawl ran: to its end, or stopped by q, Ctrl-C, a signal, --max-time or ctl stop
EXIT_USAGE = 2  # bad command line, unusable state file or output: a one-line message
EXIT_NO_ROOT = 4  # no root could be fetched at all (refused, DNS, TLS, timeout): wget's network failure
EXIT_READER_LEFT = 141  # stdout's or stderr's reader closed the pipe (`| head`): 128 + SIGPIPE (cli/stdout.py)
EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  the crawl ran: to its end, or stopped by q, Ctrl-C, a signal, --max-time or
     `ctl stop`, whatever the pages answered (404s and failed links included)
  {EXIT_USAGE}  usage: a bad option or URL, an unusable --state or output file
  {EXIT_NO_ROOT}  no root could be fetched at all (refused, name does not resolve, TLS,
     timed out): nothing answered; the reason is on stderr
  {EXIT_READER_LEFT}  the reader of standard output or error left (`| head -1`): the crawl
     still ends as it would have, then exits with no message, as any writer that
     SIGPIPE would have killed (every command; any other code goes first)
"""
