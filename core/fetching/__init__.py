"""Where a URL is fetched: one HTTP attempt and its retry policy, the one session
(headers, proxy, cookies, secrets), and robots.txt, asked before a host's first page."""
