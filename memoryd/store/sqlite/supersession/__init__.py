"""Supersession: newer memories replacing older ones, its jobs, and history."""
