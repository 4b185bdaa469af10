"""The JSON-RPC 2.0 envelope, pure: payload bytes -> calls, results/errors -> payload bytes.

The envelope is decoded once with a typed msgspec decoder; ``params`` stays a ``msgspec.Raw``
slice of the payload so the dispatcher decodes it exactly once, straight into the method's own
params Struct.  Replies are encoded with one reusable encoder.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from memoryd.errors import InvalidParams, InvalidRequest, ParseError, RpcError

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

#: A Raw id is one read but not representable (``1e400``, a 5,000-digit integer): echoed verbatim.
Id = str | int | float | msgspec.Raw | None


class Request(msgspec.Struct, gc=False):
    """One well-formed call.  ``params`` is None when absent, else the raw JSON object/array."""

    # gc=False: holds only str/number/Raw, so it can never be part of a reference cycle.

    method: str
    params: msgspec.Raw | None
    id: Id
    is_notification: bool


class BadCall(msgspec.Struct):
    """An entry that cannot run; it gets an error reply unless it is a notification whose only
    fault is in its params (a notification is never answered, whatever its params)."""

    id: Id
    error: RpcError
    notification: bool = False


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
    """Any object: read only when the strict decode failed, to answer with the request's "id".

    Kept raw: an id too big for a float or an int64 is still echoed as sent.
    """

    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


# A top-level object is decoded straight into the envelope; a batch into raw entries that are
# decoded one by one, so one bad entry spoils only itself.
_message_decoder = msgspec.json.Decoder(_Envelope | list[msgspec.Raw])
_entry_decoder = msgspec.json.Decoder(_Envelope)
_loose_decoder = msgspec.json.Decoder(_LooseEnvelope)
_id_decoder: msgspec.json.Decoder[str | int | float] = msgspec.json.Decoder(str | int | float)
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
    except msgspec.DecodeError:
        # msgspec refuses escapes of lone surrogates ("\ud800") anywhere; the request may still
        # be readable enough to answer with its own id.
        return _parse_leniently(payload)
    except RecursionError:
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
    """The error entry for a JSON object that is not a valid request, keeping its id if any."""
    try:
        raw_id = _loose_decoder.decode(entry).id
    except (msgspec.DecodeError, RecursionError):
        # Not an object, or too deep to read.
        return BadCall(id=None, error=InvalidRequest())
    return BadCall(id=_readable_id(raw_id), error=InvalidRequest())


def _readable_id(raw: msgspec.Raw | msgspec.UnsetType) -> Id:
    """A string or number id as a value; one no float or int64 holds as the raw text; else None."""
    if raw is msgspec.UNSET:
        return None
    first = memoryview(raw)[0]
    if first != ord('"') and first != ord("-") and not ord("0") <= first <= ord("9"):
        return None  # null, true/false, an object or an array: not an id
    try:
        value = _id_decoder.decode(raw)
    except msgspec.ValidationError:
        return raw  # a number past int64 (msgspec keeps ints to 64 bits here)
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return raw
    return value


def _parse_leniently(payload: bytes) -> Message:
    """Parse what msgspec refused with the standard library, which reads lone surrogates.

    Only error paths come here.  A lone surrogate inside ``params`` is -32602 naming the field;
    anywhere else in a request, -32600; both keep the request's id when it is a clean one.
    """
    try:
        decoded = json.loads(payload.decode("utf-8"), parse_constant=_not_json)
    except (ValueError, RecursionError):
        raise ParseError() from None
    if isinstance(decoded, dict):
        return Message(calls=[_lenient_call(decoded)], is_batch=False)
    if not isinstance(decoded, list):
        raise InvalidRequest()
    if not decoded:
        raise InvalidRequest()
    return Message(calls=[_lenient_call(entry) for entry in decoded], is_batch=True)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _lenient_call(entry: Any) -> Request | BadCall:
    if not isinstance(entry, dict):
        return BadCall(id=None, error=InvalidRequest())
    id_ = entry.get("id")
    if type(id_) not in (str, int, float) or _surrogate_at(id_, "id") is not None:
        id_ = None
    try:
        params = entry.get("params")
        in_params = _surrogate_at(params, "params" if isinstance(params, list) else "")
        elsewhere = _surrogate_at({key: value for key, value in entry.items() if key != "params"}, "")
        if in_params is not None and elsewhere is None:
            reason = "contains a lone surrogate escape (not valid Unicode)"
            error = InvalidParams.for_field(in_params or "params", reason)
            return BadCall(id=id_, error=error, notification="id" not in entry)
        if elsewhere is not None:
            return BadCall(id=id_, error=InvalidRequest())
        # Clean after all (msgspec refused something else it could not read): the usual way.
        raw = json.dumps(entry).encode()
    except (ValueError, RecursionError):
        return BadCall(id=id_, error=InvalidRequest())
    try:
        return _to_call(_entry_decoder.decode(raw))
    except msgspec.ValidationError:
        return _bad_call(raw)
    except msgspec.DecodeError:
        return BadCall(id=id_, error=InvalidRequest())


def _surrogate_at(value: Any, path: str) -> str | None:
    """The path (``content``, ``subjects[0]``) of the first string holding a lone surrogate."""
    if isinstance(value, str):
        return path if _has_lone_surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            # The path goes into the reply: a key holding the surrogate is shown escaped.
            shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
            where = f"{path}.{shown}" if path else shown
            if _has_lone_surrogate(key):
                return where
            found = _surrogate_at(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _surrogate_at(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _has_lone_surrogate(text: str) -> bool:
    # The standard library joins escaped pairs, so any surrogate left in a str is a lone one.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
