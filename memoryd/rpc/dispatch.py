"""Run JSON-RPC calls against a table of methods: one framed payload in, one reply (or none) out.

A method is registered with its params Struct; params are decoded once, from the raw envelope
slice straight into that Struct, by a decoder built at registration.  Whatever a call raises
becomes its reply in rpc/errormap.py, the only place that decides codes; a failing call never
drops the connection.  A table ``guarded_by`` a RequestGuard runs each call under the request
deadline and shutdown policy of rpc/deadlines.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import trio

from memoryd.errors import InvalidParams, MethodNotFound, RpcError
from memoryd.rpc.context import CallContext, Handler
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.envelope import BadCall, Request, encode_batch, encode_error, encode_result, parse_message
from memoryd.rpc.errormap import rpc_error_for
from memoryd.rpc.validation_errors import invalid_params_from

# CallContext is re-exported: handlers (service/, auth/) import it from here with the table.
__all__ = ["CallContext", "Handler", "MethodTable", "serve_message"]

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
        self._guard: RequestGuard | None = None

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

    def guarded_by(self, guard: RequestGuard) -> MethodTable:
        """The same methods, each call run under ``guard`` (deadline, refusal during shutdown)."""
        table = MethodTable()
        table._methods = self._methods
        table._guard = guard
        return table

    def names(self) -> list[str]:
        """Registered method names, in registration order."""
        return list(self._methods)

    async def dispatch(self, request: Request, ctx: CallContext) -> bytes | None:
        """The encoded reply to one call; None for a notification, even when it failed."""
        try:
            if self._guard is None:
                result = await self._call(request, ctx)
            else:
                result = await self._guard.run(self._call, request, ctx)
            if request.is_notification:
                return None
            # Encoding sits inside the try: a result msgspec cannot encode is our bug (-32603).
            return encode_result(request.id, result)
        except Exception as exc:
            error = rpc_error_for(exc, request.method, ctx.connection_id)
        if request.is_notification:
            return None
        return encode_error(request.id, error)

    async def _call(self, request: Request, ctx: CallContext) -> Any:
        method = self._methods.get(request.method)
        if method is None:
            raise MethodNotFound()
        return await method.handler(_decode_params(method, request.params), ctx)


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


async def serve_message(payload: bytes, table: MethodTable, ctx: CallContext) -> bytes | None:
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
