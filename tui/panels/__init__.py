"""The main screen's panels: status lines, sparklines, workers, errors, merges,
breakdowns, processes, the key bar and the summary at the end."""
