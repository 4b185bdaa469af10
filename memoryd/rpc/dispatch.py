"""Run JSON-RPC calls against a table of methods; the one place exceptions become replies.

Params are decoded once, from the raw envelope slice into the method's params Struct, with a
decoder built at registration.  ``RpcError`` → its own error; a params ``ValidationError`` →
-32602 naming the field; anything else → -32603 plus an error log with traceback.  A failing
call never drops the connection.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import trio

from memoryd.errors import InternalError, InvalidParams, MethodNotFound, RpcError
from memoryd.rpc.envelope import (
    BadCall,
    Request,
    encode_batch,
    encode_error,
    encode_result,
    parse_message,
)

__all__ = ["CallContext", "Dispatcher", "Handler", "MethodTable", "invalid_params_from", "serve_message"]

log = logging.getLogger("memoryd.rpc")


@dataclass
class CallContext:
    """Who is calling: the peer's credentials (SO_PEERCRED) and the connection it came on."""

    peer_uid: int | None = None
    peer_pid: int | None = None
    peer_gid: int | None = None
    connection_id: int = 0
    extras: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[Any, CallContext], Awaitable[Any]]


class Dispatcher(Protocol):
    """What :func:`serve_message` needs: a MethodTable, or a wrapper around one (the server's)."""

    async def dispatch(self, request: Request, ctx: CallContext) -> bytes | None: ...

_OPEN_BRACKET = ord("[")
#: How many calls of one batch run at once.
BATCH_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class _Method:
    decoder: msgspec.json.Decoder[Any]
    handler: Handler
    # An array_like params Struct takes positional params; every other one needs an object.
    array_like: bool
    empty: bytes


class MethodTable:
    """Method name → (params Struct, async handler)."""

    def __init__(self) -> None:
        self._methods: dict[str, _Method] = {}

    def register(self, name: str, params_type: type[msgspec.Struct], handler: Handler) -> None:
        if name in self._methods:
            raise ValueError(f"method {name!r} is already registered")
        if not (isinstance(params_type, type) and issubclass(params_type, msgspec.Struct)):
            raise TypeError(f"params_type of {name!r} must be a msgspec.Struct subclass")
        array_like = bool(params_type.__struct_config__.array_like)
        self._methods[name] = _Method(
            decoder=msgspec.json.Decoder(params_type),
            handler=handler,
            array_like=array_like,
            empty=b"[]" if array_like else b"{}",
        )

    def names(self) -> list[str]:
        """Registered method names, in registration order."""
        return list(self._methods)

    async def dispatch(self, request: Request, ctx: CallContext) -> bytes | None:
        """The encoded reply to one call; None for a notification, even when it failed."""
        try:
            method = self._methods.get(request.method)
            if method is None:
                raise MethodNotFound()
            params = _decode_params(method, request.params)
            result = await method.handler(params, ctx)
            if request.is_notification:
                return None
            # Encoding sits inside the try: a result msgspec cannot encode is our bug (-32603).
            return encode_result(request.id, result)
        except RpcError as err:
            error = err
        except Exception:
            # No params in the log: they may hold memory contents.
            log.exception("method %r failed on connection %d", request.method, ctx.connection_id)
            error = InternalError()
        if request.is_notification:
            return None
        return encode_error(request.id, error)


def _decode_params(method: _Method, raw: msgspec.Raw | None) -> Any:
    try:
        return method.decoder.decode(method.empty if raw is None else raw)
    except msgspec.ValidationError as exc:
        # Checked only on failure, off the hot path: an array where an object was expected
        # gets the message the contract promises rather than msgspec's.
        if raw is not None and memoryview(raw)[0] == _OPEN_BRACKET and not method.array_like:
            raise InvalidParams(
                "params must be an object", {"field": "params", "reason": "must be an object"}
            ) from None
        raise invalid_params_from(exc) from None
    except RecursionError:
        raise InvalidParams.for_field("params", "are nested too deeply") from None


async def serve_message(payload: bytes, table: Dispatcher, ctx: CallContext) -> bytes | None:
    """Answer one framed payload: a reply, a batch reply, or None when nothing needs answering."""
    try:
        message = parse_message(payload)
    except RpcError as err:
        return encode_error(None, err)
    calls = message.calls
    if not message.is_batch:
        call = calls[0]
        if isinstance(call, BadCall):
            return encode_error(call.id, call.error)
        return await table.dispatch(call, ctx)
    replies: list[bytes | None] = [None] * len(calls)
    requests: list[tuple[int, Request]] = []
    for index, call in enumerate(calls):
        if isinstance(call, BadCall):
            replies[index] = encode_error(call.id, call.error)
        else:
            requests.append((index, call))
    queue = iter(requests)

    async def worker() -> None:
        # Workers share one iterator: a batch of 10,000 calls runs BATCH_CONCURRENCY at a time
        # instead of starting 10,000 tasks.
        for index, call in queue:
            replies[index] = await table.dispatch(call, ctx)

    # The calls of a batch run concurrently; replies keep request order for readability
    # (the spec allows any order, and clients match by id anyway).
    async with trio.open_nursery() as nursery:
        for _ in range(min(BATCH_CONCURRENCY, len(requests))):
            nursery.start_soon(worker)
    items = [reply for reply in replies if reply is not None]
    return encode_batch(items) if items else None


# -- ValidationError → InvalidParams -------------------------------------------------------
#
# msgspec's messages look like "Expected `int` >= 1 - at `$.limit`"; callers (often a model
# writing tool calls) get the field as a path without "$." and a short readable reason.

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
