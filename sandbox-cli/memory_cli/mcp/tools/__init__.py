"""The MCP tools: their schemas and descriptions, and each one's call into memoryd.

A tool takes only what the model decides (what to remember, what to look for); who the caller
is comes from the environment through the client, so no schema has a user, chat or token
field and a call naming one is refused (:data:`IDENTITY_ARGUMENTS`).  Each tool answers with
``structuredContent`` matching its ``outputSchema`` and a short text for clients that show
only text.  A memory is shown to the model without its owner or chat: the model needs what
is known, not whose row it is.

``tool`` holds the tool's shape and argument checks, ``schemas`` the shared JSON Schema pieces,
``views`` how records are shown; ``storing``, ``reading``, ``forgetting`` and ``people`` hold
the tools of each family.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from memory_cli.mcp.tools.forgetting import FORGET, FORGET_EVERYTHING, FORGET_PERSON
from memory_cli.mcp.tools.people import PEOPLE
from memory_cli.mcp.tools.reading import CONTEXT, LIST_MEMORIES, MEMORY_HISTORY, RECALL
from memory_cli.mcp.tools.schemas import MAX_CONTENT_CHARS, MAX_QUERY_CHARS, MEMORY, PERSON
from memory_cli.mcp.tools.storing import PIN_MEMORY, REMEMBER, UNPIN_MEMORY
from memory_cli.mcp.tools.tool import IDENTITY_ARGUMENTS, Json, Outcome, Tool, ToolFailed
from memory_cli.mcp.tools.views import memory_view, person_view

__all__ = [
    "BY_NAME",
    "IDENTITY_ARGUMENTS",
    "MAX_CONTENT_CHARS",
    "MAX_QUERY_CHARS",
    "MEMORY",
    "PERSON",
    "TOOLS",
    "Json",
    "Outcome",
    "Tool",
    "ToolFailed",
    "find",
    "memory_view",
    "person_view",
]

#: In the order ``tools/list`` shows them.
TOOLS: Tuple[Tool, ...] = (
    REMEMBER,
    RECALL,
    CONTEXT,
    LIST_MEMORIES,
    FORGET,
    PIN_MEMORY,
    UNPIN_MEMORY,
    FORGET_PERSON,
    FORGET_EVERYTHING,
    MEMORY_HISTORY,
    PEOPLE,
)

BY_NAME: Dict[str, Tool] = {tool.name: tool for tool in TOOLS}


def find(name: str) -> Optional[Tool]:
    return BY_NAME.get(name)
