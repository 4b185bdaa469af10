"""The ``people`` tool: the people known from the user's memories, or one of them."""

from __future__ import annotations

from memory_cli.mcp.tools.schemas import ABOUT, PERSON, object_schema
from memory_cli.mcp.tools.tool import Json, Outcome, Tool
from memory_cli.mcp.tools.views import memory_lines, person_view
from memoryd_client import MemoryClient


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
    return {"person": person}, "\n".join([head, *memory_lines(person.get("memories") or [], "No memories about them.")])


PEOPLE = Tool(
    name="people",
    title="People the user knows",
    description=(
        "Without 'name': list the people known from the user's memories (name, relationship, how many "
        "memories). With 'name' (a name, alias or relationship such as \"my sister\"): that person and "
        "what is known about them. Call it when the user refers to someone and you need to know who they are."
    ),
    input_schema=object_schema(
        {
            "name": ABOUT,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "description": "at most this many memories about them",
            },
        }
    ),
    output_schema=object_schema({"people": {"type": "array", "items": PERSON}, "person": PERSON}),
    read_only=True,
    destructive=False,
    idempotent=True,
    run=_people,
)
