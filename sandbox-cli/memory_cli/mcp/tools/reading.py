"""The tools that read memories: ``recall`` (search), ``context``, ``list_memories``, ``memory_history``."""

from __future__ import annotations

from memory_cli import render
from memory_cli.mcp.tools.schemas import ABOUT, ID, MAX_QUERY_CHARS, MEMORY_LIST, PERSON, nullable, object_schema
from memory_cli.mcp.tools.tool import Json, Outcome, Tool
from memory_cli.mcp.tools.views import memory_lines, memory_view, person_view
from memoryd_client import MemoryClient


def _recall(client: MemoryClient, args: Json) -> Outcome:
    hits = client.search(args["query"], limit=args.get("limit", 10), about=args.get("about"))
    memories = [memory_view(hit) for hit in hits]
    return {"memories": memories}, "\n".join(memory_lines(memories, "No memories found."))


RECALL = Tool(
    name="recall",
    title="Search memories",
    description=(
        "Search what is known about the user and their people, best match first. Call it when you "
        'need a specific fact you do not have in the conversation ("what is Sarah allergic to?", '
        "\"when is the dentist?\"). Use 'about' to keep only memories about one person. For a general "
        "briefing before answering a message, call 'context' instead."
    ),
    input_schema=object_schema(
        {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "what to look for, in words",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "description": "at most this many (default 10)",
            },
            "about": ABOUT,
        },
        ["query"],
    ),
    output_schema=object_schema({"memories": MEMORY_LIST}, ["memories"]),
    read_only=True,
    destructive=False,
    idempotent=True,
    run=_recall,
)


def _context(client: MemoryClient, args: Json) -> Outcome:
    result = client.context(
        args["message"],
        limit=args.get("limit"),
        max_chars=args.get("max_chars"),
        include_summary=args.get("include_summary"),
    )
    structured: Json = {
        "text": result.get("text") or "",
        "summary": result.get("summary"),
        "memories": [memory_view(memory) for memory in result.get("memories") or []],
        "people": [person_view(person) for person in result.get("people") or []],
    }
    # With the summary, an empty block means nothing is stored; without it, nothing relevant.
    empty = "No memories found." if args.get("include_summary") is False else "Nothing known yet."
    return structured, structured["text"] or empty


CONTEXT = Tool(
    name="context",
    title="What to know before replying",
    description=(
        "Get what is known that matters for replying to a message: a short summary of the user, the "
        "people the message mentions, and the most relevant memories, as one ready-to-read text block. "
        "Call it at the start of a conversation or before answering a message that may depend on the "
        "user's life, preferences or plans."
    ),
    input_schema=object_schema(
        {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "the user's message",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "description": "at most this many memories (default 5)",
            },
            "max_chars": {
                "type": "integer",
                "minimum": 100,
                "maximum": 20000,
                "description": "length limit of the text (default 2000)",
            },
            "include_summary": {
                "type": "boolean",
                "description": "false: leave out the summary of everything known about the user "
                "(default: the daemon's setting, normally true)",
            },
        },
        ["message"],
    ),
    output_schema=object_schema(
        {
            "text": {"type": "string"},
            "summary": nullable("string"),
            "memories": MEMORY_LIST,
            "people": {"type": "array", "items": PERSON},
        },
        ["text", "memories", "people"],
    ),
    read_only=True,
    destructive=False,
    idempotent=True,
    run=_context,
)


def _list_memories(client: MemoryClient, args: Json) -> Outcome:
    limit = args.get("limit", 20)
    records = client.list(limit=limit, before_id=args.get("before_id"), about=args.get("about"))
    memories = [memory_view(record) for record in records]
    structured: Json = {"memories": memories}
    lines = memory_lines(memories, "No memories.")
    if len(memories) == limit:
        structured["next_before_id"] = memories[-1]["id"]
        lines.append(f"(more: pass before_id={memories[-1]['id']})")
    return structured, "\n".join(lines)


LIST_MEMORIES = Tool(
    name="list_memories",
    title="List memories",
    description=(
        "List the stored memories, newest first, without a query. Call it when the user asks what you "
        "remember, or to review memories before cleaning up; to find something specific, use 'recall'. "
        "For the next page pass the returned next_before_id as before_id."
    ),
    input_schema=object_schema(
        {
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 200,
                "description": "at most this many (default 20)",
            },
            "about": ABOUT,
            "before_id": {**ID, "description": "list the memories older than this one (paging)"},
        }
    ),
    output_schema=object_schema({"memories": MEMORY_LIST, "next_before_id": {"type": "string"}}, ["memories"]),
    read_only=True,
    destructive=False,
    idempotent=True,
    run=_list_memories,
)


def _memory_history(client: MemoryClient, args: Json) -> Outcome:
    versions = [memory_view(record) for record in client.history(args["id"])]
    lines = []
    for version in versions:
        state = (
            f"replaced by {version['superseded_by'][: render.MIN_SHORT_ID]}"
            if version.get("superseded_by")
            else "current"
        )
        lines.append(
            f"- [{version['id'][: render.MIN_SHORT_ID]}] {version['created_at'][:10]} {render.one_line(version['content'])} ({state})"
        )
    return {"versions": versions}, "\n".join(lines) or "No history."


MEMORY_HISTORY = Tool(
    name="memory_history",
    title="History of a memory",
    description=(
        "Show the versions of one memory, oldest first: the facts it replaced and what replaced it, "
        "with the reason. Call it when the user asks how or when something they told you changed."
    ),
    input_schema=object_schema({"id": ID}, ["id"]),
    output_schema=object_schema({"versions": MEMORY_LIST}, ["versions"]),
    read_only=True,
    destructive=False,
    idempotent=True,
    run=_memory_history,
)
