"""msgspec's ValidationError → InvalidParams naming the field, with a reason a person can read.

msgspec's messages look like "Expected `int` >= 1 - at `$.limit`"; callers (often a model
writing tool calls) get the field as a path without "$." and a short readable reason.
"""

from __future__ import annotations

import re

import msgspec

from memoryd.errors import InvalidParams

__all__ = ["invalid_params_from"]

_AT = re.compile(r"^(?P<msg>.*) - at `\$(?P<path>.*)`$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>.*)`$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>.*)`$", re.DOTALL)
_GOT = re.compile(r"^Expected `(?P<type>[^`]*)`, got `(?P<got>[^`]*)`$")
_BOUND = re.compile(r"^Expected `(?P<type>[^`]*)` (?P<op>>=|<=|>|<) (?P<n>\S+)$")
_LENGTH = re.compile(r"^Expected `(?P<type>[^`]*)` of length (?P<op>>=|<=) (?P<n>\d+)$")
_REGEX = re.compile(r"^Expected `(?P<type>[^`]*)` matching regex (?P<re>.*)$", re.DOTALL)
_MULTIPLE = re.compile(r"^Expected `(?P<type>[^`]*)` that's a multiple of (?P<n>\S+)$")
_ENUM = re.compile(r"^Invalid enum value (?P<value>.*)$", re.DOTALL)

_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
    "bytes": "base64-encoded bytes",
    "datetime": "an RFC 3339 date-time",
    "date": "an ISO 8601 date",
    "time": "an ISO 8601 time",
    "uuid": "a UUID",
    "decimal": "a decimal number",
}
_LENGTH_UNITS = {"str": "characters", "array": "items", "object": "entries"}


def invalid_params_from(exc: msgspec.ValidationError) -> InvalidParams:
    """Turn a msgspec validation message into ``InvalidParams`` naming the field."""
    text = str(exc)
    path = ""
    at = _AT.match(text)
    if at:
        text, path = at["msg"], at["path"]
    path = path.removeprefix(".")
    if found := _MISSING.match(text):
        return InvalidParams.for_field(_join(path, found["name"]), "is required")
    if found := _UNKNOWN.match(text):
        known = "parameter" if not path else "field"
        return InvalidParams.for_field(_join(path, found["name"]), f"is not a known {known}")
    return InvalidParams.for_field(path or "params", _reason(text))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type_words(spec: str) -> str:
    words = [_TYPE_WORDS.get(part.strip(), part.strip()) for part in spec.split("|")]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _reason(text: str) -> str:
    if found := _GOT.match(text):
        return f"must be {_type_words(found['type'])}"
    if found := _BOUND.match(text):
        return f"must be {found['op']} {found['n']}"
    if found := _LENGTH.match(text):
        unit = _LENGTH_UNITS.get(found["type"], "items")
        least = "at least" if found["op"] == ">=" else "at most"
        if found["type"] == "str":
            return f"must be {least} {found['n']} {unit} long"
        return f"must have {least} {found['n']} {unit}"
    if found := _REGEX.match(text):
        return f"must match the pattern {found['re']}"
    if found := _MULTIPLE.match(text):
        return f"must be a multiple of {found['n']}"
    if found := _ENUM.match(text):
        return f"{found['value']} is not an allowed value"
    if text == "Number out of range":
        return "is out of range"
    # A __post_init__ check raising ValueError/TypeError: its message is already for humans.
    return text
