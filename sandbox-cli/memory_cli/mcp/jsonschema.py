"""Checks tool arguments against the tools' own input schemas (standard library only).

Only the JSON Schema keywords the tool schemas use are understood (``type``, ``properties``,
``required``, ``additionalProperties``, ``items``, ``enum``, ``const``, the length and range bounds); a
schema using another keyword would pass unchecked, so ``test_mcp_schemas`` holds every tool
schema to this subset.  The error names the argument, so a model can correct its call.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

#: The keywords :func:`first_error` checks, plus the annotation-only ones it may ignore.
KNOWN_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "description",
        "title",
        "default",
        "examples",
        "$schema",
    }
)


def _is_type(value: Any, name: str) -> bool:
    # bool is an int in Python but not a number in JSON.
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        # JSON Schema counts 2.0 as an integer: some clients send every number as a float.
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    return False


def _type_names(schema: Dict[str, Any]) -> List[str]:
    kind = schema.get("type")
    if kind is None:
        return []
    return [kind] if isinstance(kind, str) else list(kind)


def first_error(value: Any, schema: Dict[str, Any], path: str = "") -> Optional[str]:
    """The first way ``value`` breaks ``schema`` (``"limit: must be at least 1"``), or None."""
    where = f"{path}: " if path else ""
    kinds = _type_names(schema)
    if kinds and not any(_is_type(value, kind) for kind in kinds):
        return f"{where}must be {' or '.join(kinds)}, got {_json_type(value)}"
    if "const" in schema and not (_json_type(value) == _json_type(schema["const"]) and value == schema["const"]):
        return f"{where}must be {_literal(schema['const'])}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(choice) for choice in schema["enum"])
        return f"{where}must be one of {choices}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where}must not be empty" if schema["minLength"] == 1 else f"{where}too short"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}must be at most {schema['maxLength']} characters (got {len(value)})"
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where}must be at least {schema['minimum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{where}must be greater than {schema['exclusiveMinimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where}must be at most {schema['maximum']}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where}needs at least {schema['minItems']} item(s)"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where}must have at most {schema['maxItems']} items (got {len(value)})"
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                error = first_error(item, items, f"{path}[{index}]")
                if error:
                    return error
    if isinstance(value, dict):
        properties: Dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                return f"{_join(path, name)}: is required"
        if schema.get("additionalProperties") is False:
            for name in value:
                if name not in properties:
                    return f"{_join(path, name)}: unknown argument (accepted: {', '.join(properties) or 'none'})"
        for name, item in value.items():
            if name in properties:
                error = first_error(item, properties[name], _join(path, name))
                if error:
                    return error
    return None


def with_integers(arguments: Dict[str, Any], schema: Dict[str, Any]) -> Dict[str, Any]:
    """``arguments`` (already checked against ``schema``) with each integer-typed property that
    arrived as a float (``5.0``) as the int it stands for, which is what memoryd accepts."""
    properties: Dict[str, Any] = schema.get("properties", {})
    return {
        name: int(value) if isinstance(value, float) and "integer" in _type_names(properties.get(name, {})) else value
        for name, value in arguments.items()
    }


def _literal(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return repr(value)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name):
            return name
    return type(value).__name__
