"""The dashboard: every crawl on one screen (`crawltop` alone)."""
