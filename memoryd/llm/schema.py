"""The JSON schema asked of a model, and the decode of what it answered.

A model's reply is never trusted: it is decoded with msgspec into the caller's Struct, and
anything else (empty, prose, the wrong shape) is a :class:`BadReply` the client retries.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeVar

import msgspec

T = TypeVar("T", bound=msgspec.Struct)

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


class BadReply(Exception):
    """A reply that is not the requested JSON.  The reason names the place, never the text
    (the text is made of the user's conversation)."""


@functools.cache
def json_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """``struct``'s JSON schema with every ``$ref`` inlined and an object at the root.

    OpenAI's json_schema mode wants ``"type": "object"`` at the root, and some servers'
    grammar builders do not follow references; our reply types are not recursive, so
    inlining always ends.
    """
    schema = msgspec.json.schema(struct)
    definitions = schema.pop("$defs", {})
    inlined = _inline(schema, definitions, seen=())
    assert isinstance(inlined, dict)
    return inlined


def _inline(node: Any, definitions: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise TypeError(f"recursive reply type {name} cannot be inlined")
        return _inline(definitions[name], definitions, (*seen, name))
    return {key: _inline(value, definitions, seen) for key, value in node.items()}


@functools.cache
def _decoder(struct: type[msgspec.Struct]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(struct)


def decode_reply(text: str, struct: type[T]) -> T:
    """The model's text as a ``struct``; raises :class:`BadReply`.

    Tolerates the two wrappings models add when no schema binds them: a Markdown code fence,
    and a sentence around the object ("Here are the facts: {...}").
    """
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        raise BadReply("empty reply")
    decoder: msgspec.json.Decoder[T] = _decoder(struct)
    try:
        return decoder.decode(text)
    except msgspec.ValidationError as exc:
        raise BadReply(f"reply is not the requested shape: {exc}") from None
    except msgspec.DecodeError as exc:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end and (start, end) != (0, len(text) - 1):
            try:
                return decoder.decode(text[start : end + 1])
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
        raise BadReply(f"reply is not JSON: {exc}") from None
