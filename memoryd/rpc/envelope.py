"""The JSON-RPC 2.0 envelope, pure: payload bytes -> calls, results/errors -> payload bytes.

The envelope is decoded once with a typed msgspec decoder; ``params`` stays a ``msgspec.Raw``
slice of the payload so the dispatcher decodes it exactly once, straight into the method's own
params Struct.  Replies are encoded with one reusable encoder.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from memoryd.errors import InvalidRequest, ParseError, RpcError

__all__ = [
    "BadCall",
    "Id",
    "Message",
    "Request",
    "encode_batch",
    "encode_error",
    "encode_result",
    "parse_message",
]

Id = str | int | float | None


class Request(msgspec.Struct, gc=False):
    """One well-formed call.  ``params`` is None when absent, else the raw JSON object/array."""

    # gc=False: holds only str/number/Raw, so it can never be part of a reference cycle.

    method: str
    params: msgspec.Raw | None
    id: Id
    is_notification: bool


class BadCall(msgspec.Struct):
    """An entry that is not a valid request; it always gets an error reply."""

    id: Id
    error: RpcError


class Message(msgspec.Struct):
    calls: list[Request | BadCall]
    is_batch: bool


class _Envelope(msgspec.Struct):
    """A valid request, typed so the decoder validates it in one pass (the hot path).

    UNSET tells an absent "id" (a notification) from ``"id": null``.  msgspec is strict: a
    bool is not accepted as an int, so ``"id": true`` fails here as the spec wants.
    """

    jsonrpc: Literal["2.0"]
    method: str
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    id: str | int | float | None | msgspec.UnsetType = msgspec.UNSET


class _LooseEnvelope(msgspec.Struct):
    """Any object: read only when the strict decode failed, to answer with a valid "id"."""

    id: Any = msgspec.UNSET


# A top-level object is decoded straight into the envelope; a batch into raw entries that are
# decoded one by one, so one bad entry spoils only itself.
_message_decoder = msgspec.json.Decoder(_Envelope | list[msgspec.Raw])
_entry_decoder = msgspec.json.Decoder(_Envelope)
_loose_decoder = msgspec.json.Decoder(_LooseEnvelope)
# Decoding into Raw only skips over the value: a full syntax check that converts nothing.
_syntax_decoder = msgspec.json.Decoder(msgspec.Raw)
_encoder = msgspec.json.Encoder()

_OBJECT_OR_ARRAY = (ord("{"), ord("["))


def parse_message(payload: bytes) -> Message:
    """Parse one framed payload.

    Raises :class:`ParseError` when the payload is not JSON or not UTF-8 (also when it nests
    too deeply to decode), :class:`InvalidRequest` for ``[]`` or a top level that is neither an
    object nor an array.  Invalid requests, single or inside a batch, become :class:`BadCall`.
    """
    # msgspec does not validate UTF-8 inside strings it skips or keeps raw (unknown members,
    # params), so check the whole payload once; isascii() is the cheap common case.
    if not payload.isascii():
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError() from None
    try:
        decoded = _message_decoder.decode(payload)
    except msgspec.ValidationError:
        # Not a valid request; but msgspec stops at the first bad type, so whether the payload
        # is JSON at all is still open.
        return Message(calls=[_invalid_top_level(payload)], is_batch=False)
    except (msgspec.DecodeError, RecursionError):
        raise ParseError() from None
    if isinstance(decoded, _Envelope):
        return Message(calls=[_to_call(decoded)], is_batch=False)
    if not decoded:
        raise InvalidRequest()
    calls: list[Request | BadCall] = []
    for raw in decoded:
        try:
            calls.append(_to_call(_entry_decoder.decode(raw)))
        except msgspec.ValidationError:
            calls.append(_bad_call(raw))
        except RecursionError:
            calls.append(BadCall(id=None, error=InvalidRequest()))
    return Message(calls=calls, is_batch=True)


def _to_call(envelope: _Envelope) -> Request | BadCall:
    id_ = envelope.id
    params: msgspec.Raw | None = None
    if isinstance(envelope.params, msgspec.Raw):
        params = envelope.params
        if memoryview(params)[0] not in _OBJECT_OR_ARRAY:
            return BadCall(id=None if id_ is msgspec.UNSET else id_, error=InvalidRequest())
    if id_ is msgspec.UNSET:
        return Request(method=envelope.method, params=params, id=None, is_notification=True)
    return Request(method=envelope.method, params=params, id=id_, is_notification=False)


def _invalid_top_level(payload: bytes) -> BadCall:
    try:
        _syntax_decoder.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        raise ParseError() from None
    if payload.lstrip()[:1] != b"{":
        raise InvalidRequest()  # a string, number, true/false/null at the top level
    return _bad_call(payload)


def _bad_call(entry: bytes | msgspec.Raw) -> BadCall:
    """The error entry for a JSON object that is not a valid request, keeping a valid id."""
    try:
        id_ = _loose_decoder.decode(entry).id
    except (msgspec.DecodeError, RecursionError):
        # Not an object, or an id too big or too deep to read.
        return BadCall(id=None, error=InvalidRequest())
    # type() rather than isinstance(): a bool is an int to Python but not a valid JSON-RPC id.
    if type(id_) not in (str, int, float):
        id_ = None
    return BadCall(id=id_, error=InvalidRequest())


class _Result(msgspec.Struct):
    jsonrpc: str
    result: Any
    id: Any


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Error(msgspec.Struct):
    jsonrpc: str
    error: _ErrorObject
    id: Any


def encode_result(id: Id, result: Any) -> bytes:
    """A success reply.  ``result`` may be a Struct, dict, list, scalar or None (sent as null)."""
    return _encoder.encode(_Result("2.0", result, id))


def encode_error(id: Id, err: RpcError) -> bytes:
    """An error reply; ``data`` is omitted when the error carries none."""
    return _encoder.encode(_Error("2.0", _ErrorObject(err.code, err.message, err.data), id))


def encode_batch(items: list[bytes]) -> bytes:
    """Join already-encoded replies into a JSON array without decoding them again."""
    return b"[" + b",".join(items) + b"]"
