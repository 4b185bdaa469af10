"""``system.health``: liveness for anyone, the daemon's numbers for trusted callers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import msgspec
import trio

from memoryd import __version__
from memoryd.errors import StoreError
from memoryd.rpc.dispatch import NOT_NOW, CallContext, NotNow
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.conversation import ConversationService
from memoryd.service.memory import MemoryService
from memoryd.service.params import HealthParams
from memoryd.store import JobQueue
from memoryd.store.condition import Condition

#: Health's store numbers are reused for this long unless this process wrote meanwhile.
HEALTH_CACHE_SECONDS = 1.0

#: Memory counts, the embedding backlog, the conversation queue's numbers.
StoreNumbers = tuple[dict[str, Any], dict[str, int], dict[str, Any]]

_encoder = msgspec.json.Encoder()


def _encode_raw(value: Any) -> msgspec.Raw:
    return msgspec.Raw(_encoder.encode(value))


@dataclass
class HealthReporter:
    """``system.health``: cheap enough to poll; no memory contents.

    Counting memories scans an index (about 13 ms at 100k), and two worker-thread hops cost more
    than the whole RPC; so the store's numbers are cached until the next write or for a second.
    """

    service: MemoryService
    #: None without an embedder.
    backfill: EmbeddingBackfill | None
    #: The server's counters (``RpcServer.stats``), shown under "server".
    server_stats: Callable[[], dict[str, Any]]
    _: KW_ONLY
    jobs: JobQueue
    conversations: ConversationService | None = None
    started: float = field(default_factory=time.monotonic, init=False)
    _store_numbers: StoreNumbers | None = field(default=None, init=False)
    _store_numbers_stamp: tuple[int, float] = field(default=(-1, 0.0), init=False)
    # Parts of the reply kept encoded (msgspec.Raw) with what they were encoded from.
    _store_parts: tuple[Condition, StoreNumbers, tuple[msgspec.Raw, ...]] | None = field(default=None, init=False)
    _described_parts: dict[str, tuple[dict[str, Any], msgspec.Raw]] = field(default_factory=dict, init=False)

    def health_now(self, params: HealthParams, ctx: CallContext) -> dict[str, Any] | NotNow:
        """The reply without waiting, or NOT_NOW when the store's numbers must be read first (a
        write since, or older than HEALTH_CACHE_SECONDS): the connection answers it in its read
        loop (rpc/dispatch.py ``answer_now``) and runs :meth:`health` only for NOT_NOW."""
        if not self.service.authenticator.sees_health_details(ctx):
            # Never needs a token (liveness probes, `memory health` in a sandbox), so in token
            # mode only trusted peers see the host-wide numbers; everyone else gets liveness only.
            return self._liveness()
        numbers = self._store_numbers
        if numbers is None or self._stale(trio.current_time()):
            return NOT_NOW
        return self._report(numbers)

    async def health(self, params: HealthParams, ctx: CallContext) -> dict[str, Any]:
        answer = self.health_now(params, ctx)
        if answer is not NOT_NOW:
            return answer
        try:
            numbers = await self._read_store_numbers()
        except StoreError:
            # The numbers may sit on damaged pages; health must still answer (the store's
            # condition now says corrupt, and the reason is shown).
            return self._report(({}, {}, {}), unreadable=True)
        return self._report(numbers)

    def _liveness(self, storage: Condition | None = None) -> dict[str, Any]:
        if storage is None:
            storage = self.service.memories.storage
        backfill = self.backfill
        degraded = storage.state != "ok" or (
            self.service.embedder is not None and backfill is not None and bool(backfill.last_error)
        )
        liveness: dict[str, Any] = {
            "status": "degraded" if degraded else "ok",
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self.started, 3),
        }
        if storage.state != "ok":
            # A full disk or a damaged file: every caller should learn why writes fail.
            liveness["reason"] = storage.reason
        return liveness

    def _report(self, numbers: StoreNumbers, *, unreadable: bool = False) -> dict[str, Any]:
        # A poller's every call comes here (health_now).  The parts that change only with the
        # store's condition and numbers are kept encoded until either object is replaced; the
        # others are described afresh and re-encoded only when they differ from last time.
        storage = self.service.memories.storage
        report = self._liveness(storage)
        if unreadable:
            report.update(status="degraded", reason=storage.reason or "the store could not be read")
        store_parts = self._store_parts
        if store_parts is None or store_parts[0] is not storage or store_parts[1] is not numbers:
            counts, backlog, _ = numbers
            encoded = (_encode_raw(storage.to_dict()), _encode_raw(counts), _encode_raw(backlog))
            store_parts = self._store_parts = (storage, numbers, encoded)
        storage_part, counts_part, backlog_part = store_parts[2]
        report["storage"] = storage_part
        report["counts"] = counts_part
        report["embedder"] = self._described("embedder", self._embedder_state())
        report["backlog"] = backlog_part
        report["server"] = self.server_stats()
        if self.conversations is not None:
            report["extraction"] = self._described("extraction", self.conversations.describe(numbers[2]))
        report["secrets"] = self._described("secrets", self.service.secrets.describe())
        return report

    def _described(self, part: str, value: dict[str, Any]) -> msgspec.Raw:
        """``value`` encoded, reusing the last bytes when ``value`` equals what they hold.

        The comparison is against the bytes decoded again, not against the last value itself: a
        describe() may hand out a dict that its owner later changes in place, and a kept
        reference would then always compare equal.
        """
        last = self._described_parts.get(part)
        if last is not None and last[0] == value:
            return last[1]
        raw = _encode_raw(value)
        self._described_parts[part] = (msgspec.json.decode(raw), raw)
        return raw

    def _embedder_state(self) -> dict[str, Any]:
        embedder, backfill = self.service.embedder, self.backfill
        if embedder is None:
            return {"backend": "none", "state": "disabled"}
        state = dict(embedder.describe())
        if backfill is not None:
            state["vector_space_ready"] = backfill.vector_space_ready
            state["embedded_since_start"] = backfill.embedded_total
            # memory.add: embedded before its reply (idle embedder) or left to the backfill.
            state["adds_embedded_at_once"] = backfill.own_total
            state["adds_left_to_backfill"] = backfill.deferred_total
            if backfill.last_error:
                state["last_error"] = backfill.last_error
        return state

    def _stale(self, now: float) -> bool:
        writes, taken_at = self._store_numbers_stamp
        return writes != self.service.memories.write_count or now - taken_at > HEALTH_CACHE_SECONDS

    async def _read_store_numbers(self) -> StoreNumbers:
        memories = self.service.memories
        stamp = (memories.write_count, trio.current_time())
        queue = {} if self.conversations is None else await self.conversations.conversations.status()
        numbers = (await memories.health_counts(), await self.jobs.backlog(), queue)
        self._store_numbers, self._store_numbers_stamp = numbers, stamp
        return numbers
