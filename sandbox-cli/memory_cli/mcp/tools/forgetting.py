"""The tools that delete: one memory (``forget``), a person, everything about the user."""

from __future__ import annotations

from memory_cli import render
from memory_cli.mcp.tools.schemas import ABOUT, CONFIRM, ID, PERSON, STRINGS, object_schema
from memory_cli.mcp.tools.tool import Json, Outcome, Tool, ToolFailed
from memory_cli.mcp.tools.views import person_view
from memoryd_client import MemoryClient

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


def _forget(client: MemoryClient, args: Json) -> Outcome:
    result = client.delete(args["id"])
    if not result.get("deleted"):
        raise ToolFailed("No memory visible to you matches that id: nothing was deleted.")
    return {"deleted": True, "id": result["id"]}, f"Forgot memory {result['id'][: render.MIN_SHORT_ID]}."


FORGET = Tool(
    name="forget",
    title="Forget a memory",
    description=(
        "Delete one memory for good, by its id (or a unique prefix of 8+ characters) as shown by recall "
        "or list_memories. Call it when the user asks you to forget something or a memory is wrong and "
        "should not be replaced by a corrected one (to correct a fact, 'remember' the new one instead: "
        "it replaces the old)."
    ),
    input_schema=object_schema({"id": ID}, ["id"]),
    output_schema=object_schema({"deleted": {"type": "boolean"}, "id": {"type": "string"}}, ["deleted", "id"]),
    read_only=False,
    destructive=True,
    idempotent=True,
    run=_forget,
)


def _forget_person(client: MemoryClient, args: Json) -> Outcome:
    result = client.forget_person(args["name"])
    person = person_view(result["person"])
    deleted = list(result.get("deleted") or [])
    structured = {"person": person, "person_deleted": bool(result.get("person_deleted")), "deleted": deleted}
    return structured, f"Forgot {person['name']}: {len(deleted)} memories about them deleted."


FORGET_PERSON = Tool(
    name="forget_person",
    title="Forget a person",
    description=(
        "Delete every memory about one person that is visible here, and the person, for good. Call it only "
        "when the user asks you to forget someone, and only after they confirmed: pass confirm: true once "
        "they said yes. To forget one memory, use 'forget' instead."
    ),
    input_schema=object_schema({"name": ABOUT, "confirm": CONFIRM}, ["name", "confirm"]),
    output_schema=object_schema(
        {"person": PERSON, "person_deleted": {"type": "boolean"}, "deleted": STRINGS},
        ["person", "person_deleted", "deleted"],
    ),
    read_only=False,
    destructive=True,
    idempotent=True,
    run=_forget_person,
    confirm="This deletes every memory about that person and the person.",
)


def _forget_everything(client: MemoryClient, args: Json) -> Outcome:
    result = client.forget_all(include_group=bool(args.get("include_group", False)))
    erased = {kind: int(count) for kind, count in (result.get("erased") or {}).items()}
    listed = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in erased.items() if count)
    text = "Erased everything stored about you" + (f": {listed}." if listed else " (there was nothing).")
    return {"erased": erased, "include_group": bool(result.get("include_group"))}, text


FORGET_EVERYTHING = Tool(
    name="forget_everything",
    title="Erase everything about the user",
    description=(
        "Erase everything stored about the user, at once and for good: every personal memory, the people, "
        "the observed conversations. Group memories the user added stay with their chat without the "
        "user's name, unless include_group is true. Call it only when the user explicitly asks you to "
        "forget everything about them, and only after they confirmed: pass confirm: true once they said yes."
    ),
    input_schema=object_schema(
        {
            "confirm": CONFIRM,
            "include_group": {
                "type": "boolean",
                "description": "also delete the group memories the user added (default: they stay, anonymised)",
            },
        },
        ["confirm"],
    ),
    output_schema=object_schema(
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
)
