"""Memories themselves: add, list, get and delete within a scope, ids and prefixes, hit counts."""
