"""Observed conversations on PostgreSQL: messages, their extraction jobs, storing extracted facts, episodes."""

from memoryd.store.postgres.conversations.conversation_log import Conversations
from memoryd.store.postgres.conversations.extraction_jobs import status

__all__ = ["Conversations", "status"]
