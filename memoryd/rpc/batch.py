"""A JSON-RPC batch: its calls run concurrently, a bounded number at a time, one reply for all.

``dispatch.serve_message`` hands a parsed batch here; each call is answered by the method
table's ``dispatch``, as a single call would be.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from memoryd.errors import InvalidRequest, RpcError
from memoryd.rpc.budget import ReplyBudget
from memoryd.rpc.context import CallContext
from memoryd.rpc.envelope import BadCall, Request, encode_batch, encode_error

__all__ = ["BATCH_CONCURRENCY", "Dispatch", "serve_batch"]

#: How many calls of one batch run at once.
BATCH_CONCURRENCY = 16

#: One call to its encoded reply (None for a notification): ``MethodTable.dispatch``.
Dispatch = Callable[[Request, CallContext], Awaitable[bytes | None]]


async def serve_batch(
    calls: list[Request | BadCall],
    dispatch: Dispatch,
    ctx: CallContext,
    budget: ReplyBudget | None,
    max_batch_calls: int | None,
) -> bytes | None:
    """The reply to a batch's ``calls``: each call run by ``dispatch``, BATCH_CONCURRENCY at a
    time, the replies in request order; None when every call was a notification.

    Replies are charged to ``budget`` as they are built; once one does not fit, the calls not
    yet run are answered with the budget's error instead.  A batch of more than
    ``max_batch_calls`` calls raises InvalidRequest without running any.
    """
    if max_batch_calls is not None and len(calls) > max_batch_calls:
        # Refused whole, before anything runs or is charged: serve_message answers it.
        raise InvalidRequest(
            f"Invalid Request: a batch may hold at most {max_batch_calls} calls (max_batch_calls)",
            {"limit": "max_batch_calls", "max_batch_calls": max_batch_calls, "calls": len(calls)},
        )
    replies: list[bytes | None] = [None] * len(calls)
    requests: list[tuple[int, Request]] = []
    for index, call in enumerate(calls):
        if isinstance(call, BadCall):
            replies[index] = None if call.notification else encode_error(call.id, call.error)
        else:
            requests.append((index, call))
    queue = iter(requests)
    taken = 0
    refusal: RpcError | None = None

    async def worker() -> None:
        nonlocal taken, refusal
        # Workers share one iterator: a batch of 10,000 calls runs BATCH_CONCURRENCY at a time
        # instead of starting 10,000 tasks.
        for index, call in queue:
            if refusal is not None:
                # Over the budget: the rest of the batch is answered, not run.
                replies[index] = None if call.is_notification else encode_error(call.id, refusal)
                continue
            reply = await dispatch(call, ctx)
            if reply is not None and budget is not None:
                refused = budget.take(len(reply))
                if refused is None:
                    taken += len(reply)
                else:
                    refusal = refusal or refused
                    reply = encode_error(call.id, refusal)
            replies[index] = reply

    # The calls of a batch run concurrently; replies keep request order for readability
    # (the spec allows any order, and clients match by id anyway).
    try:
        async with trio.open_nursery() as nursery:
            for _ in range(min(BATCH_CONCURRENCY, len(requests))):
                nursery.start_soon(worker)
    except BaseException:
        if budget is not None:
            budget.settle(taken, 0)  # cancelled: no reply will be sent
        raise
    items = [reply for reply in replies if reply is not None]
    out = encode_batch(items) if items else None
    if budget is not None:
        budget.settle(taken, len(out) if out is not None else 0)
    return out
