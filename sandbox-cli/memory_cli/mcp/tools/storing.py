"""The tools that store: ``remember`` a fact, ``pin_memory`` and ``unpin_memory``."""

from __future__ import annotations

from memory_cli import render
from memory_cli.mcp.tools.schemas import ID, MAX_CONTENT_CHARS, MEMORY, SUBJECTS, nullable, object_schema
from memory_cli.mcp.tools.tool import Json, Outcome, Tool, ToolFailed
from memory_cli.mcp.tools.views import memory_view
from memoryd_client import MemoryClient, NotFound


def _remember(client: MemoryClient, args: Json) -> Outcome:
    if "about" in args and "subjects" in args:
        raise ToolFailed("subjects: the same as about; pass one of them, not both")
    result = client.add(
        args["content"],
        expires_days=args.get("expires_in_days"),
        subjects=args.get("about", args.get("subjects")),
        shared=bool(args.get("shared", False)),
    )
    replaced = []
    for old_id in result.get("superseded") or []:
        try:
            old = client.get(old_id)
        except NotFound:
            continue
        replaced.append({"id": old["id"], "content": old.get("content", "")})
    status = "refreshed" if result.get("deduplicated") else "added"
    structured = {
        "id": result["id"],
        "status": status,
        "scope": result.get("scope") or "personal",
        "expires_at": result.get("expires_at"),
        "replaced": replaced,
    }
    short = result.get("short_id") or result["id"][: render.MIN_SHORT_ID]
    if status == "refreshed":
        text = f"Already known; refreshed memory {short}."
    else:
        text = f"Remembered ({render.scope_label(structured['scope'])}): {short}."
    for old in replaced:
        text += f'\nReplaced {old["id"][: render.MIN_SHORT_ID]}: "{render.one_line(old["content"])}"'
    return structured, text


REMEMBER = Tool(
    name="remember",
    title="Remember a fact",
    description=(
        "Store a lasting fact about the user or the people in their life, so it is known in later "
        "conversations: preferences, plans, relationships, decisions, corrections. Call it when the "
        "user tells you something worth knowing next time, or asks you to remember. One fact per call, "
        "as a full sentence that makes sense on its own. If it updates an earlier fact (a new address, "
        "a changed plan) the older memory is replaced and reported in 'replaced'; repeating a known fact "
        "only refreshes it. Not for secrets or passwords."
    ),
    input_schema=object_schema(
        {
            "content": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CONTENT_CHARS,
                "description": "the fact, as a sentence",
            },
            "about": SUBJECTS,
            # memory.add's own name for the same list, for callers that use it.
            "subjects": {**SUBJECTS, "description": "the same as about (memoryd's name for it)"},
            "expires_in_days": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 36500,
                "description": "forget it after this many days (for temporary facts: a trip, a deadline)",
            },
            "shared": {
                "type": "boolean",
                "description": "visible to everyone in the current chat (default: only the user)",
            },
        },
        ["content"],
    ),
    output_schema=object_schema(
        {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["added", "refreshed"]},
            "scope": {"type": "string", "enum": ["personal", "group"]},
            "expires_at": nullable("string"),
            "replaced": {
                "type": "array",
                "items": object_schema({"id": {"type": "string"}, "content": {"type": "string"}}, ["id", "content"]),
            },
        },
        ["id", "status", "scope", "replaced"],
    ),
    read_only=False,
    destructive=False,  # additive: a replaced memory stays in its history
    idempotent=True,  # the same fact again is refreshed, not stored twice
    run=_remember,
)


def _pinning_tool(name: str, title: str, description: str, pin: bool) -> Tool:
    """``pin_memory`` and ``unpin_memory``: the same argument and answer, opposite calls."""

    def run(client: MemoryClient, args: Json) -> Outcome:
        memory = memory_view((client.pin if pin else client.unpin)(args["id"]))
        short = memory["id"][: render.MIN_SHORT_ID]
        if pin:
            return {"memory": memory, "pinned": True}, f"Pinned memory {short}: it is kept for good."
        return {"memory": memory, "pinned": False}, f"Unpinned memory {short}: it may be evicted again like any other."

    return Tool(
        name=name,
        title=title,
        description=description,
        input_schema=object_schema({"id": ID}, ["id"]),
        output_schema=object_schema({"memory": MEMORY, "pinned": {"type": "boolean"}}, ["memory", "pinned"]),
        read_only=False,
        destructive=False,
        idempotent=True,
        run=run,
    )


PIN_MEMORY = _pinning_tool(
    "pin_memory",
    "Pin a memory",
    "Keep one memory for good, by its id (or a unique prefix of 8+ characters) as shown by recall or "
    "list_memories: a pinned memory never expires and is never evicted when the store is full. Call it "
    'when the user says something must always be remembered ("never forget that I am allergic to '
    "penicillin\"). Pinning clears the memory's expiry. Undo with unpin_memory.",
    pin=True,
)
UNPIN_MEMORY = _pinning_tool(
    "unpin_memory",
    "Unpin a memory",
    "Undo pin_memory: the memory stays, but may be evicted again like any other when the store is "
    "full (an expiry that pinning cleared stays cleared). Call it when the user says a pinned memory "
    "no longer needs to be kept for good. Nothing is deleted.",
    pin=False,
)
