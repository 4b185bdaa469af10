"""Connections: one writer and a pool of readers off the event loop, group commit, the storage condition, the meta table."""
