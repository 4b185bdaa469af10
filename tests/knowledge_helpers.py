"""Shorthands of the knowledge rules' tests: a statement, and whether a newer one supersedes."""

from __future__ import annotations

from memoryd.knowledge.conflict import Statement, decide


def s(content: str, subjects: tuple[str, ...] = (), speaker: str | None = None) -> Statement:
    return Statement(content, subjects, speaker)


def supersedes(old: str, new: str) -> bool:
    return decide(s(old), s(new)).supersedes
