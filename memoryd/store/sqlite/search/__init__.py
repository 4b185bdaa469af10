"""Hybrid search: FTS5 keyword retrieval, the people retriever, neighbourhoods, overlapped parts, the ranking call."""
