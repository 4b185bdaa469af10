"""How the tools show daemon records to a model: a memory without its owner or chat, a person.

The model needs what is known, not whose row it is.
"""

from __future__ import annotations

from typing import List, Sequence

from memory_cli import render
from memory_cli.mcp.tools.tool import Json


def memory_view(record: Json) -> Json:
    """The fields of a daemon record a model can use, never its owner or chat."""
    view = {
        "id": record["id"],
        "content": record.get("content", ""),
        "about": list(record.get("about") or record.get("subjects") or []),
        "scope": record.get("scope") or "personal",
        "created_at": record.get("created_at") or "",
        "expires_at": record.get("expires_at"),
        "source": record.get("source") or "",
    }
    if isinstance(record.get("score"), (int, float)):
        view["score"] = round(float(record["score"]), 4)
    if isinstance(record.get("relevance"), (int, float)):
        view["relevance"] = round(float(record["relevance"]), 4)
    if record.get("superseded_by"):
        view["superseded_by"] = record["superseded_by"]
        view["supersede_reason"] = record.get("supersede_reason")
    if record.get("pinned") is True:
        view["pinned"] = True
    return view


def person_view(record: Json) -> Json:
    view: Json = {
        "id": record["id"],
        "name": record.get("name", ""),
        "aliases": list(record.get("aliases") or []),
        "relationship": record.get("relationship"),
    }
    memories = record.get("memories")
    if isinstance(memories, int):
        view["memory_count"] = memories
    elif isinstance(memories, list):
        view["memories"] = [memory_view(memory) for memory in memories]
        view["memory_count"] = len(memories)
    return view


def memory_lines(memories: Sequence[Json], empty: str) -> List[str]:
    if not memories:
        return [empty]
    ids = render.short_ids([memory["id"] for memory in memories])
    lines = []
    for memory in memories:
        about = f" (about {', '.join(memory['about'])})" if memory["about"] else ""
        pinned = " (pinned)" if memory.get("pinned") else ""
        lines.append(f"- [{ids[memory['id']]}] {render.one_line(memory['content'])}{about}{pinned}")
    return lines
