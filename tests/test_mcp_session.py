"""The MCP session without I/O: framing, eras and errors, line by line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from memory_cli.mcp import tools
from memory_cli.mcp.jsonschema import first_error
from memory_cli.mcp.session import Session
from memory_cli.mcp.stdio import serve

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def echo_tool(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    tools.BY_NAME[name].check_arguments(arguments)
    return {"memories": []}, "No memories found."


def line(session: Session, message: Any) -> Any:
    return session.receive_line(json.dumps(message).encode())


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", -32700),
        (b'"a string"', -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', -32602),
    ],
)
def test_a_malformed_message_gets_the_json_rpc_error(raw: bytes, code: int) -> None:
    reply = Session(echo_tool, "0").receive_line(raw)
    assert reply is not None and reply["error"]["code"] == code


def test_notifications_and_stray_responses_get_no_reply() -> None:
    session = Session(echo_tool, "0")
    assert line(session, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}) is None
    assert line(session, {"jsonrpc": "2.0", "id": 5, "result": {}}) is None
    assert line(session, {"jsonrpc": "2.0", "method": "no/such/notification"}) is None


def test_the_first_request_decides_the_era() -> None:
    modern = Session(echo_tool, "0")
    assert line(modern, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})["result"][
        "tools"
    ]
    assert modern.era == "modern"
    handshake = Session(echo_tool, "0")
    reply = line(
        handshake, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    )
    assert reply["result"]["protocolVersion"] == "2025-06-18" and handshake.era == "handshake"
    again = line(handshake, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert again is None and handshake.initialized
    assert (
        line(
            handshake, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
        )["error"]["code"]
        == -32600
    )
    missing_capabilities = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    fresh = Session(echo_tool, "0")
    assert (
        line(fresh, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": missing_capabilities})["error"][
            "code"
        ]
        == -32602
    )
    assert fresh.era is None


def test_modern_ping_is_gone_but_discover_is_there() -> None:
    session = Session(echo_tool, "0")
    assert (
        line(session, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": META}})["error"]["code"]
        == -32601
    )
    assert line(session, {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": META}})["result"][
        "capabilities"
    ] == {"tools": {}}


def test_a_ping_before_initialize_is_answered_and_decides_nothing() -> None:
    session = Session(echo_tool, "0")
    assert line(session, {"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == {}
    assert session.era is None
    reply = line(session, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": META}})
    assert reply["result"]["tools"] and session.era == "modern"


@pytest.mark.parametrize("version", [None, 20260728, ["2026-07-28"]])
def test_a_stateless_version_that_is_not_a_string_is_invalid_params(version: Any) -> None:
    """Not a version to negotiate (-32022), a malformed envelope: the SDK's ladder says -32602."""
    session = Session(echo_tool, "0")
    meta = {**META, "io.modelcontextprotocol/protocolVersion": version}
    reply = line(session, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert reply["error"]["code"] == -32602 and "protocolVersion" in reply["error"]["message"]
    assert session.era is None


def test_serve_skips_an_oversized_line_and_answers_the_next() -> None:
    stdin = io.BytesIO(
        b'{"x": "'
        + b"a" * 5000
        + b'"}\n\n{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}\n'
    )
    stdout = io.BytesIO()
    serve(Session(echo_tool, "0"), stdin, stdout, max_line_bytes=1000)
    first, second = [json.loads(text) for text in stdout.getvalue().splitlines()]
    assert first["error"]["code"] == -32600 and "5010 bytes" in first["error"]["message"]
    assert second["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    ("value", "schema", "error"),
    [
        (True, {"type": "integer"}, "must be integer, got boolean"),
        (1.5, {"type": "integer"}, "must be integer, got number"),
        (2.0, {"type": "integer", "minimum": 1}, None),  # JSON Schema: 2.0 is an integer
        (0.0, {"type": "integer", "minimum": 1}, "must be at least 1"),
        (3, {"type": "number", "exclusiveMinimum": 3}, "must be greater than 3"),
        ("", {"type": "string", "minLength": 1}, "must not be empty"),
        ([1, "a"], {"type": "array", "items": {"type": "integer"}}, "[1]: must be integer"),
        (
            {"a": {"b": 1}},
            {"type": "object", "properties": {"a": {"type": "object", "required": ["c"]}}},
            "a.c: is required",
        ),
        ("z", {"enum": ["x", "y"]}, "must be one of 'x', 'y'"),
        (1, {"const": True}, "must be true"),  # 1 == True in Python, not in JSON
        (False, {"const": True}, "must be true"),
        (True, {"const": True}, None),
        (None, {"type": ["string", "null"]}, None),
    ],
)
def test_the_schema_check_names_what_is_wrong(value: Any, schema: dict[str, Any], error: str | None) -> None:
    found = first_error(value, schema)
    assert (found is None) if error is None else (found is not None and error in found), found
