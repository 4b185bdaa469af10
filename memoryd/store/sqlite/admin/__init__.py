"""Whole-store operations: maintenance, retention and gc, eviction, stats, check, export/import, backup."""
