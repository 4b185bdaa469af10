"""The MCP tools: their schemas and descriptions, and each one's call into memoryd.

A tool takes only what the model decides (what to remember, what to look for); who the caller
is comes from the environment through the client, so no schema has a user, chat or token
field and a call naming one is refused (:data:`IDENTITY_ARGUMENTS`).  Each tool answers with
``structuredContent`` matching its ``outputSchema`` and a short text for clients that show
only text.  A memory is shown to the model without its owner or chat: the model needs what
is known, not whose row it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from memory_cli import render
from memory_cli.mcp.jsonschema import first_error, with_integers
from memoryd_client import MemoryClient, NotFound

Json = Dict[str, Any]

#: Argument names that would say who the caller is.  None is a tool argument; a call that
#: passes one is refused with this explanation rather than the generic unknown-argument one.
IDENTITY_ARGUMENTS = frozenset(
    {
        "user_id",
        "userId",
        "user",
        "owner",
        "chat_id",
        "chatId",
        "chat",
        "chat_type",
        "context_token",
        "token",
        "session_key",
        "source_username",
        "source_display_name",
        "message_id",
    }
)
#: memoryd's own limit on a memory's content (16 KiB of UTF-8); a character is at least one
#: byte, so this many characters is the most the daemon could accept.
MAX_CONTENT_CHARS = 16 * 1024
MAX_QUERY_CHARS = 16 * 1024


class ToolFailed(Exception):
    """The tool ran and failed: the model gets ``isError: true`` and this message."""


def _nullable(kind: str) -> Json:
    return {"type": [kind, "null"]}


_STRINGS = {"type": "array", "items": {"type": "string"}}

#: A memory as the tools show it.
MEMORY: Json = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "full id; any unique prefix of 8+ characters also works"},
        "content": {"type": "string"},
        "about": {**_STRINGS, "description": "the people it is about"},
        "scope": {"type": "string", "enum": ["personal", "group"]},
        "created_at": {"type": "string"},
        "expires_at": _nullable("string"),
        "source": {"type": "string"},
        "score": {"type": "number", "description": "the ranking's score, higher is better (recall and context only)"},
        "relevance": {
            "type": "number",
            "description": "estimated probability, 0..1, that it helps answer the query (recall and context only)",
        },
        "superseded_by": {**_nullable("string"), "description": "the id of the memory that replaced this one"},
        "supersede_reason": _nullable("string"),
        "pinned": {"type": "boolean", "description": "kept for good: never expired or evicted (present when true)"},
    },
    "required": ["id", "content", "about", "scope", "created_at"],
    "additionalProperties": False,
}

PERSON: Json = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "aliases": _STRINGS,
        "relationship": _nullable("string"),
        "memory_count": {"type": "integer"},
        "memories": {"type": "array", "items": MEMORY},
    },
    "required": ["id", "name", "aliases", "relationship"],
    "additionalProperties": False,
}

_MEMORY_LIST: Json = {"type": "array", "items": MEMORY}


def _object(properties: Json, required: Sequence[str] = ()) -> Json:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


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


def _memory_lines(memories: Sequence[Json], empty: str) -> List[str]:
    if not memories:
        return [empty]
    ids = render.short_ids([memory["id"] for memory in memories])
    lines = []
    for memory in memories:
        about = f" (about {', '.join(memory['about'])})" if memory["about"] else ""
        pinned = " (pinned)" if memory.get("pinned") else ""
        lines.append(f"- [{ids[memory['id']]}] {render.one_line(memory['content'])}{about}{pinned}")
    return lines


# -- the calls ------------------------------------------------------------------------------

Outcome = Tuple[Json, str]


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


def _recall(client: MemoryClient, args: Json) -> Outcome:
    hits = client.search(args["query"], limit=args.get("limit", 10), about=args.get("about"))
    memories = [memory_view(hit) for hit in hits]
    return {"memories": memories}, "\n".join(_memory_lines(memories, "No memories found."))


def _context(client: MemoryClient, args: Json) -> Outcome:
    result = client.context(args["message"], limit=args.get("limit"), max_chars=args.get("max_chars"))
    structured = {
        "text": result.get("text") or "",
        "summary": result.get("summary"),
        "memories": [memory_view(memory) for memory in result.get("memories") or []],
        "people": [person_view(person) for person in result.get("people") or []],
    }
    return structured, structured["text"] or "Nothing known yet."


def _list_memories(client: MemoryClient, args: Json) -> Outcome:
    limit = args.get("limit", 20)
    records = client.list(limit=limit, before_id=args.get("before_id"), about=args.get("about"))
    memories = [memory_view(record) for record in records]
    structured: Json = {"memories": memories}
    lines = _memory_lines(memories, "No memories.")
    if len(memories) == limit:
        structured["next_before_id"] = memories[-1]["id"]
        lines.append(f"(more: pass before_id={memories[-1]['id']})")
    return structured, "\n".join(lines)


def _forget(client: MemoryClient, args: Json) -> Outcome:
    result = client.delete(args["id"])
    if not result.get("deleted"):
        raise ToolFailed("No memory visible to you matches that id: nothing was deleted.")
    return {"deleted": True, "id": result["id"]}, f"Forgot memory {result['id'][: render.MIN_SHORT_ID]}."


def _pin(client: MemoryClient, args: Json) -> Outcome:
    memory = memory_view(client.pin(args["id"]))
    short = memory["id"][: render.MIN_SHORT_ID]
    return {"memory": memory, "pinned": True}, f"Pinned memory {short}: it is kept for good."


def _unpin(client: MemoryClient, args: Json) -> Outcome:
    memory = memory_view(client.unpin(args["id"]))
    short = memory["id"][: render.MIN_SHORT_ID]
    return {"memory": memory, "pinned": False}, f"Unpinned memory {short}: it may be evicted again like any other."


def _forget_person(client: MemoryClient, args: Json) -> Outcome:
    result = client.forget_person(args["name"])
    person = person_view(result["person"])
    deleted = list(result.get("deleted") or [])
    structured = {"person": person, "person_deleted": bool(result.get("person_deleted")), "deleted": deleted}
    return structured, f"Forgot {person['name']}: {len(deleted)} memories about them deleted."


def _forget_everything(client: MemoryClient, args: Json) -> Outcome:
    result = client.forget_all(include_group=bool(args.get("include_group", False)))
    erased = {kind: int(count) for kind, count in (result.get("erased") or {}).items()}
    listed = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in erased.items() if count)
    text = "Erased everything stored about you" + (f": {listed}." if listed else " (there was nothing).")
    return {"erased": erased, "include_group": bool(result.get("include_group"))}, text


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


def _people(client: MemoryClient, args: Json) -> Outcome:
    name = args.get("name")
    if name is None:
        people = [person_view(person) for person in client.people()]
        lines = [
            f"- {p['name']}"
            + (f" ({p['relationship']})" if p["relationship"] else "")
            + f": {p.get('memory_count', 0)} memories"
            for p in people
        ]
        return {"people": people}, "\n".join(lines) or "No people known yet."
    person = person_view(client.person(name, limit=args.get("limit")))
    head = person["name"] + (f" ({person['relationship']})" if person["relationship"] else "")
    if person["aliases"]:
        head += f", also {', '.join(person['aliases'])}"
    return {"person": person}, "\n".join(
        [head, *_memory_lines(person.get("memories") or [], "No memories about them.")]
    )


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: Json
    output_schema: Json
    read_only: bool
    destructive: bool
    idempotent: bool
    run: Callable[[MemoryClient, Json], Outcome]
    #: Destructive beyond one memory: the call needs ``confirm: true``, and this says what it
    #: would destroy when that is missing.
    confirm: Optional[str] = None

    def definition(self) -> Json:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                # Only this user's memory store: nothing outside it is touched or read.
                "openWorldHint": False,
            },
        }

    def check_arguments(self, arguments: Json) -> Json:
        """The arguments to run the tool with; raise :class:`ToolFailed` naming a bad one."""
        for name in arguments:
            if name in IDENTITY_ARGUMENTS:
                raise ToolFailed(
                    f"{name}: not accepted. This server acts only for the user it was started for "
                    "(from its environment); identity is never taken from tool arguments."
                )
        if self.confirm is not None and arguments.get("confirm") is not True:
            raise ToolFailed(
                f"confirm: must be true. {self.confirm} It cannot be undone: ask the user whether they want "
                "this, and only if they say so call again with confirm: true. Nothing was deleted."
            )
        error = first_error(arguments, self.input_schema)
        if error:
            raise ToolFailed(f"Invalid arguments for {self.name}: {error}")
        return with_integers(arguments, self.input_schema)


_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 26,  # a full id; memoryd refuses anything longer
    "description": "a memory id, or a unique prefix of it (8+ characters)",
}
_ABOUT = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": 'a person: name, alias or relationship ("Sarah", "my wife")',
}
_SUBJECTS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 200},
    "maxItems": 32,
    "description": 'the people it is about, by name ("Sarah"); omit for the user themself',
}
_CONFIRM = {
    "type": "boolean",
    "const": True,
    "description": "must be true, and set only after the user has said yes to exactly this",
}
_ERASED_KINDS = (
    "memories",
    "episodes",
    "group_memories_deleted",
    "group_memories_anonymised",
    "people",
    "messages",
    "sessions",
    "jobs",
    "vectors",
    "audit_events",
)

TOOLS: Tuple[Tool, ...] = (
    Tool(
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
        input_schema=_object(
            {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_CONTENT_CHARS,
                    "description": "the fact, as a sentence",
                },
                "about": _SUBJECTS,
                # memory.add's own name for the same list, for callers that use it.
                "subjects": {**_SUBJECTS, "description": "the same as about (memoryd's name for it)"},
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
        output_schema=_object(
            {
                "id": {"type": "string"},
                "status": {"type": "string", "enum": ["added", "refreshed"]},
                "scope": {"type": "string", "enum": ["personal", "group"]},
                "expires_at": _nullable("string"),
                "replaced": {
                    "type": "array",
                    "items": _object({"id": {"type": "string"}, "content": {"type": "string"}}, ["id", "content"]),
                },
            },
            ["id", "status", "scope", "replaced"],
        ),
        read_only=False,
        destructive=False,  # additive: a replaced memory stays in its history
        idempotent=True,  # the same fact again is refreshed, not stored twice
        run=_remember,
    ),
    Tool(
        name="recall",
        title="Search memories",
        description=(
            "Search what is known about the user and their people, best match first. Call it when you "
            'need a specific fact you do not have in the conversation ("what is Sarah allergic to?", '
            "\"when is the dentist?\"). Use 'about' to keep only memories about one person. For a general "
            "briefing before answering a message, call 'context' instead."
        ),
        input_schema=_object(
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
                "about": _ABOUT,
            },
            ["query"],
        ),
        output_schema=_object({"memories": _MEMORY_LIST}, ["memories"]),
        read_only=True,
        destructive=False,
        idempotent=True,
        run=_recall,
    ),
    Tool(
        name="context",
        title="What to know before replying",
        description=(
            "Get what is known that matters for replying to a message: a short summary of the user, the "
            "people the message mentions, and the most relevant memories, as one ready-to-read text block. "
            "Call it at the start of a conversation or before answering a message that may depend on the "
            "user's life, preferences or plans."
        ),
        input_schema=_object(
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
            },
            ["message"],
        ),
        output_schema=_object(
            {
                "text": {"type": "string"},
                "summary": _nullable("string"),
                "memories": _MEMORY_LIST,
                "people": {"type": "array", "items": PERSON},
            },
            ["text", "memories", "people"],
        ),
        read_only=True,
        destructive=False,
        idempotent=True,
        run=_context,
    ),
    Tool(
        name="list_memories",
        title="List memories",
        description=(
            "List the stored memories, newest first, without a query. Call it when the user asks what you "
            "remember, or to review memories before cleaning up; to find something specific, use 'recall'. "
            "For the next page pass the returned next_before_id as before_id."
        ),
        input_schema=_object(
            {
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 200,
                    "description": "at most this many (default 20)",
                },
                "about": _ABOUT,
                "before_id": {**_ID, "description": "list the memories older than this one (paging)"},
            }
        ),
        output_schema=_object({"memories": _MEMORY_LIST, "next_before_id": {"type": "string"}}, ["memories"]),
        read_only=True,
        destructive=False,
        idempotent=True,
        run=_list_memories,
    ),
    Tool(
        name="forget",
        title="Forget a memory",
        description=(
            "Delete one memory for good, by its id (or a unique prefix of 8+ characters) as shown by recall "
            "or list_memories. Call it when the user asks you to forget something or a memory is wrong and "
            "should not be replaced by a corrected one (to correct a fact, 'remember' the new one instead: "
            "it replaces the old)."
        ),
        input_schema=_object({"id": _ID}, ["id"]),
        output_schema=_object({"deleted": {"type": "boolean"}, "id": {"type": "string"}}, ["deleted", "id"]),
        read_only=False,
        destructive=True,
        idempotent=True,
        run=_forget,
    ),
    Tool(
        name="pin_memory",
        title="Pin a memory",
        description=(
            "Keep one memory for good, by its id (or a unique prefix of 8+ characters) as shown by recall or "
            "list_memories: a pinned memory never expires and is never evicted when the store is full. Call it "
            'when the user says something must always be remembered ("never forget that I am allergic to '
            "penicillin\"). Pinning clears the memory's expiry. Undo with unpin_memory."
        ),
        input_schema=_object({"id": _ID}, ["id"]),
        output_schema=_object({"memory": MEMORY, "pinned": {"type": "boolean"}}, ["memory", "pinned"]),
        read_only=False,
        destructive=False,
        idempotent=True,
        run=_pin,
    ),
    Tool(
        name="unpin_memory",
        title="Unpin a memory",
        description=(
            "Undo pin_memory: the memory stays, but may be evicted again like any other when the store is "
            "full (an expiry that pinning cleared stays cleared). Call it when the user says a pinned memory "
            "no longer needs to be kept for good. Nothing is deleted."
        ),
        input_schema=_object({"id": _ID}, ["id"]),
        output_schema=_object({"memory": MEMORY, "pinned": {"type": "boolean"}}, ["memory", "pinned"]),
        read_only=False,
        destructive=False,
        idempotent=True,
        run=_unpin,
    ),
    Tool(
        name="forget_person",
        title="Forget a person",
        description=(
            "Delete every memory about one person that is visible here, and the person, for good. Call it only "
            "when the user asks you to forget someone, and only after they confirmed: pass confirm: true once "
            "they said yes. To forget one memory, use 'forget' instead."
        ),
        input_schema=_object({"name": _ABOUT, "confirm": _CONFIRM}, ["name", "confirm"]),
        output_schema=_object(
            {"person": PERSON, "person_deleted": {"type": "boolean"}, "deleted": _STRINGS},
            ["person", "person_deleted", "deleted"],
        ),
        read_only=False,
        destructive=True,
        idempotent=True,
        run=_forget_person,
        confirm="This deletes every memory about that person and the person.",
    ),
    Tool(
        name="forget_everything",
        title="Erase everything about the user",
        description=(
            "Erase everything stored about the user, at once and for good: every personal memory, the people, "
            "the observed conversations. Group memories the user added stay with their chat without the "
            "user's name, unless include_group is true. Call it only when the user explicitly asks you to "
            "forget everything about them, and only after they confirmed: pass confirm: true once they said yes."
        ),
        input_schema=_object(
            {
                "confirm": _CONFIRM,
                "include_group": {
                    "type": "boolean",
                    "description": "also delete the group memories the user added (default: they stay, anonymised)",
                },
            },
            ["confirm"],
        ),
        output_schema=_object(
            {
                "erased": {
                    "type": "object",
                    "description": "how many records of each kind were erased",
                    "properties": {kind: {"type": "integer", "minimum": 0} for kind in _ERASED_KINDS},
                    "required": list(_ERASED_KINDS),
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
                "include_group": {"type": "boolean"},
            },
            ["erased", "include_group"],
        ),
        read_only=False,
        destructive=True,
        idempotent=True,
        run=_forget_everything,
        confirm="This erases everything stored about the user: every memory, the people, the conversations.",
    ),
    Tool(
        name="memory_history",
        title="History of a memory",
        description=(
            "Show the versions of one memory, oldest first: the facts it replaced and what replaced it, "
            "with the reason. Call it when the user asks how or when something they told you changed."
        ),
        input_schema=_object({"id": _ID}, ["id"]),
        output_schema=_object({"versions": _MEMORY_LIST}, ["versions"]),
        read_only=True,
        destructive=False,
        idempotent=True,
        run=_memory_history,
    ),
    Tool(
        name="people",
        title="People the user knows",
        description=(
            "Without 'name': list the people known from the user's memories (name, relationship, how many "
            "memories). With 'name' (a name, alias or relationship such as \"my sister\"): that person and "
            "what is known about them. Call it when the user refers to someone and you need to know who they are."
        ),
        input_schema=_object(
            {
                "name": _ABOUT,
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 100,
                    "description": "at most this many memories about them",
                },
            }
        ),
        output_schema=_object({"people": {"type": "array", "items": PERSON}, "person": PERSON}),
        read_only=True,
        destructive=False,
        idempotent=True,
        run=_people,
    ),
)

BY_NAME: Dict[str, Tool] = {tool.name: tool for tool in TOOLS}


def find(name: str) -> Optional[Tool]:
    return BY_NAME.get(name)
