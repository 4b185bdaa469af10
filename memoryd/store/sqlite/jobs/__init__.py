"""Durable background jobs: the embed and supersede queue and how a job is leased."""
