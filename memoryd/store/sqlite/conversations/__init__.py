"""Observed conversations, their extraction jobs, and storing extracted facts."""
