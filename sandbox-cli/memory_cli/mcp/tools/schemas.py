"""The JSON Schema pieces the tools share: a memory and a person as shown, and common arguments."""

from __future__ import annotations

from typing import Sequence

from memory_cli.mcp.tools.tool import Json

#: memoryd's own limit on a memory's content (16 KiB of UTF-8); a character is at least one
#: byte, so this many characters is the most the daemon could accept.
MAX_CONTENT_CHARS = 16 * 1024
MAX_QUERY_CHARS = 16 * 1024


def nullable(kind: str) -> Json:
    return {"type": [kind, "null"]}


def object_schema(properties: Json, required: Sequence[str] = ()) -> Json:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


STRINGS: Json = {"type": "array", "items": {"type": "string"}}

#: A memory as the tools show it.
MEMORY: Json = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "full id; any unique prefix of 8+ characters also works"},
        "content": {"type": "string"},
        "about": {**STRINGS, "description": "the people it is about"},
        "scope": {"type": "string", "enum": ["personal", "group"]},
        "created_at": {"type": "string"},
        "expires_at": nullable("string"),
        "source": {"type": "string"},
        "score": {"type": "number", "description": "the ranking's score, higher is better (recall and context only)"},
        "relevance": {
            "type": "number",
            "description": "estimated probability, 0..1, that it helps answer the query (recall and context only)",
        },
        "superseded_by": {**nullable("string"), "description": "the id of the memory that replaced this one"},
        "supersede_reason": nullable("string"),
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
        "aliases": STRINGS,
        "relationship": nullable("string"),
        "memory_count": {"type": "integer"},
        "memories": {"type": "array", "items": MEMORY},
    },
    "required": ["id", "name", "aliases", "relationship"],
    "additionalProperties": False,
}

MEMORY_LIST: Json = {"type": "array", "items": MEMORY}

ID: Json = {
    "type": "string",
    "minLength": 1,
    "maxLength": 26,  # a full id; memoryd refuses anything longer
    "description": "a memory id, or a unique prefix of it (8+ characters)",
}
ABOUT: Json = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": 'a person: name, alias or relationship ("Sarah", "my wife")',
}
SUBJECTS: Json = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 200},
    "maxItems": 32,
    "description": 'the people it is about, by name ("Sarah"); omit for the user themself',
}
CONFIRM: Json = {
    "type": "boolean",
    "const": True,
    "description": "must be true, and set only after the user has said yes to exactly this",
}
