"""Whole-store operations on PostgreSQL: maintenance, retention and gc, stats, check, export/import."""
