"""What a monitor reads: live stats and their O(rows shown) snapshot, the queue's
prefix view and trap flags, host rows in words, and text made safe for a terminal."""
