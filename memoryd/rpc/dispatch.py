"""Run JSON-RPC calls against a table of methods: one framed payload in, one reply (or none) out.

A method is registered with its params Struct; params are decoded once, from the raw envelope
slice straight into that Struct, by a decoder built at registration.  A method may also register
a synchronous ``now`` form that answers without waiting on anything when it can (health with its
numbers cached): :func:`answer_now` runs it inline in the connection's read loop, with no task,
no deadline scope and no scheduler pass, and says NOT_NOW when the call needs the async path.

Whatever a call raises becomes its reply in rpc/errormap.py, the only place that decides codes;
a failing call never drops the connection.  A table ``guarded_by`` a RequestGuard runs each
call under the request deadline and shutdown policy of rpc/deadlines.py.  A batch's calls run
in rpc/batch.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from memoryd.errors import InvalidParams, MethodNotFound, RpcError
from memoryd.rpc.batch import serve_batch
from memoryd.rpc.budget import ReplyBudget
from memoryd.rpc.context import NOT_NOW, CallContext, Handler, NotNow, NowHandler
from memoryd.rpc.deadlines import RequestGuard
from memoryd.rpc.envelope import BadCall, Request, encode_error, encode_result, parse_message
from memoryd.rpc.errormap import rpc_error_for
from memoryd.rpc.validation_errors import invalid_params_from

# CallContext is re-exported: handlers (service/, auth/) import it from here with the table.
__all__ = ["NOT_NOW", "CallContext", "Handler", "MethodTable", "NotNow", "NowHandler", "answer_now", "serve_message"]

_OPEN_BRACKET = ord("[")
#: A batch that is not empty (JSON whitespace, "[", then something other than "]") never
#: answers now; an empty one is refused inline (-32600) like any unreadable request.
_BATCH_START = re.compile(rb"[ \t\r\n]*\[[ \t\r\n]*[^\] \t\r\n]")


@dataclass(frozen=True, slots=True)
class _Method:
    decoder: msgspec.json.Decoder[Any]
    handler: Handler
    # An array_like params Struct takes positional params; every other one needs an object.
    array_like: bool
    empty: bytes
    now: NowHandler | None


def _reply(request: Request, ctx: CallContext, result: Any = None, *, error: Exception | None = None) -> bytes | None:
    """The encoded reply to one call: its result, or the reply ``error`` maps to; None for a
    notification (whose error is still mapped: the mapping logs what it must)."""
    if error is None:
        if request.is_notification:
            return None
        try:
            return encode_result(request.id, result)
        except Exception as exc:  # a result msgspec cannot encode is our bug (-32603)
            error = exc
    reply = rpc_error_for(error, request.method, ctx.connection_id)
    return None if request.is_notification else encode_error(request.id, reply)


class MethodTable:
    """Method name → (params Struct, async handler)."""

    def __init__(self) -> None:
        self._methods: dict[str, _Method] = {}
        self._guard: RequestGuard | None = None
        #: When set, only these methods run; the others are answered ``_refusal``.
        self._only: frozenset[str] | None = None
        self._refusal: RpcError | None = None

    def register(
        self, name: str, params_type: type[msgspec.Struct], handler: Handler, *, now: NowHandler | None = None
    ) -> None:
        """``now``, if given, must answer exactly as ``handler`` would, or return NOT_NOW."""
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
            now=now,
        )

    def guarded_by(self, guard: RequestGuard) -> MethodTable:
        """The same methods, each call run under ``guard`` (deadline, refusal during shutdown)."""
        table = MethodTable()
        table._methods = self._methods
        table._guard = guard
        table._only, table._refusal = self._only, self._refusal
        return table

    def restricted_to(self, names: frozenset[str], refusal: RpcError) -> MethodTable:
        """The same table where every method but ``names`` is answered ``refusal`` without running
        (a health-probe connection admitted past the connection limit)."""
        table = MethodTable()
        table._methods = self._methods
        table._guard = self._guard
        table._only, table._refusal = names, refusal
        return table

    def names(self) -> list[str]:
        """Registered method names, in registration order."""
        return list(self._methods)

    def params_type(self, name: str) -> type[msgspec.Struct]:
        """The params Struct ``name`` was registered with (what its params decode into)."""
        params_type: type[msgspec.Struct] = self._methods[name].decoder.type
        return params_type

    async def dispatch(self, request: Request, ctx: CallContext) -> bytes | None:
        """The encoded reply to one call; None for a notification, even when it failed."""
        try:
            if self._guard is None:
                result = await self._call(request, ctx)
            else:
                result = await self._guard.run(self._call, request, ctx)
        except Exception as exc:
            return _reply(request, ctx, error=exc)
        return _reply(request, ctx, result)

    def dispatch_now(self, request: Request, ctx: CallContext) -> bytes | None | NotNow:
        """:meth:`dispatch` without waiting: the same reply, or NOT_NOW (nothing was run, nothing
        counted) when the method has no ``now`` form or it cannot answer at once."""
        try:
            if self._guard is None:
                result = self._call_now(request, ctx)
            else:
                result = self._guard.run_now(self._call_now, request, ctx)
        except Exception as exc:
            return _reply(request, ctx, error=exc)
        return NOT_NOW if result is NOT_NOW else _reply(request, ctx, result)

    def _method_for(self, request: Request) -> _Method:
        method = self._methods.get(request.method)
        if method is None:
            raise MethodNotFound()
        if self._only is not None and request.method not in self._only:
            assert self._refusal is not None
            raise self._refusal
        return method

    async def _call(self, request: Request, ctx: CallContext) -> Any:
        method = self._method_for(request)
        return await method.handler(_decode_params(method, request.params), ctx)

    def _call_now(self, request: Request, ctx: CallContext) -> Any:
        method = self._method_for(request)
        if method.now is None:
            return NOT_NOW
        return method.now(_decode_params(method, request.params), ctx)


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


def answer_now(
    payload: bytes, table: MethodTable, ctx: CallContext, *, budget: ReplyBudget | None = None
) -> bytes | None | NotNow:
    """:func:`serve_message` for a payload that can be answered without waiting: a single call
    whose method answers now, or one that is refused before running (unreadable, not a request,
    no such method, bad params).  NOT_NOW for anything else, batches included: run
    :func:`serve_message` in a task then.  The budget is charged as serve_message charges it.
    """
    if _BATCH_START.match(payload):
        return NOT_NOW  # not parsed here only to be parsed again by serve_message
    try:
        message = parse_message(payload)
        if message.is_batch:
            return NOT_NOW
        call = message.calls[0]
        if isinstance(call, BadCall):
            return _bad_call_reply(budget, call)
        reply = table.dispatch_now(call, ctx)
        return reply if reply is NOT_NOW else _charged(budget, call, reply)
    except Exception as exc:
        return _refused_whole(budget, exc, ctx)


async def serve_message(
    payload: bytes,
    table: MethodTable,
    ctx: CallContext,
    *,
    budget: ReplyBudget | None = None,
    max_batch_calls: int | None = None,
) -> bytes | None:
    """Answer one framed payload: a reply, a batch reply, or None when nothing needs answering.

    With a ``budget``, the reply's bytes are charged to it (the caller releases ``len(reply)``
    once it is sent): a reply that does not fit is replaced by the budget's error, and once a
    batch has hit it, its remaining calls get that error without running.  A batch of more
    than ``max_batch_calls`` calls is refused whole (-32600 naming the limit).
    """
    try:
        message = parse_message(payload)
        calls = message.calls
        if not message.is_batch:
            call = calls[0]
            if isinstance(call, BadCall):
                return _bad_call_reply(budget, call)
            return _charged(budget, call, await table.dispatch(call, ctx))
        return await serve_batch(calls, table.dispatch, ctx, budget, max_batch_calls)
    except Exception as exc:
        return _refused_whole(budget, exc, ctx)


def _bad_call_reply(budget: ReplyBudget | None, call: BadCall) -> bytes | None:
    return None if call.notification else _settled(budget, encode_error(call.id, call.error))


def _charged(budget: ReplyBudget | None, call: Request, reply: bytes | None) -> bytes | None:
    """``reply`` charged to ``budget``, or the budget's error in its place when it does not fit."""
    if reply is None or budget is None:
        return reply
    refusal = budget.take(len(reply))
    if refusal is None:
        return reply
    return _settled(budget, encode_error(call.id, refusal))


def _refused_whole(budget: ReplyBudget | None, exc: Exception, ctx: CallContext) -> bytes:
    """The reply to a payload refused as a whole: unreadable, or not a request at all."""
    if isinstance(exc, RpcError):  # from parse_message
        return _settled(budget, encode_error(None, exc))
    # A bug between the bytes and the reply (the methods' own failures never get here):
    # answer and keep the connection, and the daemon, up.
    error = rpc_error_for(exc, "<message>", ctx.connection_id)
    return _settled(budget, encode_error(None, error))


def _settled(budget: ReplyBudget | None, reply: bytes) -> bytes:
    """A short reply (an error) charged to ``budget`` without refusal."""
    if budget is not None:
        budget.settle(0, len(reply))
    return reply
