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
from memoryd.store.storage_state import Condition

#: Health's store numbers are reused for this long unless this process wrote meanwhile.
HEALTH_CACHE_SECONDS = 1.0

#: Memory counts, the embedding backlog, the conversation queue's numbers.
StoreNumbers = tuple[dict[str, Any], dict[str, int], dict[str, Any]]
#: The embedder, extraction (None without conversations) and secrets parts, as described now.
Described = tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]

_encoder = msgspec.json.Encoder()
#: A hole in the kept reply, for a value that changes on every call.  msgspec writes a Raw's
#: bytes as they are and escapes NUL inside strings, so a NUL byte in the encoded report can
#: only be one of these.
_HOLE_BYTE = b"\x00"
_HOLE = msgspec.Raw(_HOLE_BYTE)


@dataclass(frozen=True, slots=True)
class _KeptReply:
    """The full report encoded once and cut at its two holes (the uptime, the server's counters),
    with what it was built from: reused for as long as all of that stays the same."""

    storage: Condition
    numbers: StoreNumbers
    # Decoded again from the bytes, not the describe() dicts themselves: an owner may change a
    # dict it handed out in place, and a kept reference would then always compare equal.
    described: Described
    head: bytes
    middle: bytes
    tail: bytes


@dataclass
class HealthReporter:
    """``system.health``: cheap enough to poll; no memory contents.

    Counting memories scans an index (about 13 ms at 100k), and two worker-thread hops cost more
    than the whole RPC; so the store's numbers are cached until the next write or for a second.
    Every other part is described afresh on each call, but the reply's bytes are rebuilt only
    when one of them differs from the last call's: a poller's calls usually differ only in the
    uptime and the server's counters, which are written into holes left in the kept bytes.
    """

    service: MemoryService
    #: None without an embedder.
    backfill: EmbeddingBackfill | None
    #: The server's counters as a JSON object (``RpcServer.stats_json``), shown under "server".
    server_stats: Callable[[], bytes]
    _: KW_ONLY
    jobs: JobQueue
    conversations: ConversationService | None = None
    started: float = field(default_factory=time.monotonic, init=False)
    _store_numbers: StoreNumbers | None = field(default=None, init=False)
    _store_numbers_stamp: tuple[int, float] = field(default=(-1, 0.0), init=False)
    _kept: _KeptReply | None = field(default=None, init=False)
    #: Set while one call reads the store's numbers; calls that find them stale meanwhile wait
    #: for that read instead of starting their own (32 pollers after an expiry: one read).
    _reading: trio.Event | None = field(default=None, init=False)
    #: How many times the store's numbers were read (for tests and diagnostics).
    store_reads: int = field(default=0, init=False)

    def health_now(self, params: HealthParams, ctx: CallContext) -> dict[str, Any] | msgspec.Raw | NotNow:
        """The reply without waiting, or NOT_NOW when the store's numbers must be read first (a
        write since, or older than HEALTH_CACHE_SECONDS): the connection answers it in its read
        loop (rpc/dispatch.py ``answer_now``) and runs :meth:`health` only for NOT_NOW."""
        if not self.service.authenticator.sees_health_details(ctx):
            # Never needs a token (liveness probes, `memory health` in a sandbox), so in token
            # mode only trusted peers see the host-wide numbers; everyone else gets liveness only.
            return self._liveness()
        numbers = self._cached_store_numbers()
        if numbers is None:
            return NOT_NOW
        return self._kept_report(numbers)

    async def health(self, params: HealthParams, ctx: CallContext) -> dict[str, Any] | msgspec.Raw:
        if not self.service.authenticator.sees_health_details(ctx):
            return self._liveness()
        numbers = self._cached_store_numbers()
        if numbers is None:
            try:
                numbers = await self._read_store_numbers()
            except StoreError:
                # The numbers may sit on damaged pages; health must still answer (the store's
                # condition now says corrupt, and the reason is shown).
                return self._fresh_report(({}, {}, {}), unreadable=True)
        return self._kept_report(numbers)

    def report_afresh(self) -> dict[str, Any]:
        """The full report with the store numbers last read, everything else described now and
        nothing reused: what a call answered now decodes to, but for the uptime and the server's
        counters (tests hold the kept bytes to it)."""
        return self._fresh_report(self._store_numbers or ({}, {}, {}))

    def _fresh_report(self, numbers: StoreNumbers, *, unreadable: bool = False) -> dict[str, Any]:
        storage = self.service.memories.storage
        server = msgspec.json.decode(self.server_stats())
        return self._report(storage, numbers, self._describe(numbers), self._uptime(), server, unreadable=unreadable)

    def _kept_report(self, numbers: StoreNumbers) -> msgspec.Raw:
        storage = self.service.memories.storage
        described = self._describe(numbers)
        kept = self._kept
        if kept is None or kept.storage is not storage or kept.numbers is not numbers or kept.described != described:
            kept = self._kept = self._keep(storage, numbers, described)
        encode = _encoder.encode
        return msgspec.Raw(b"".join((kept.head, encode(self._uptime()), kept.middle, self.server_stats(), kept.tail)))

    def _keep(self, storage: Condition, numbers: StoreNumbers, described: Described) -> _KeptReply:
        head, middle, tail = _encoder.encode(self._report(storage, numbers, described, _HOLE, _HOLE)).split(_HOLE_BYTE)
        embedder, extraction, secrets = msgspec.json.decode(_encoder.encode(described))
        return _KeptReply(storage, numbers, (embedder, extraction, secrets), head, middle, tail)

    def _report(
        self, storage: Condition, numbers: StoreNumbers, described: Described, uptime: Any, server: Any,
        *, unreadable: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """The reply's one shape, built afresh or kept encoded with holes for uptime and server."""
        embedder, extraction, secrets = described
        report = self._liveness(storage, uptime)
        if unreadable:
            report.update(status="degraded", reason=storage.reason or "the store could not be read")
        counts, backlog, _ = numbers
        backfill = self.backfill
        if backfill is not None and backfill.awaiting_first_space and counts:
            # No vector space yet (the embedder has not answered since the store was new): no
            # memory has an embed job, and every active one waits for the embedder (superseded
            # ones count too, so this is an upper bound until the first space exists).
            backlog = {**backlog, "embed": backlog.get("embed", 0) + int(counts.get("memories_active", 0))}
        report["storage"] = storage.to_dict()
        report["counts"] = counts
        report["embedder"] = embedder
        report["backlog"] = backlog
        report["server"] = server
        if extraction is not None:
            report["extraction"] = extraction
        report["secrets"] = secrets
        return report

    def _liveness(self, storage: Condition | None = None, uptime: Any = None) -> dict[str, Any]:
        if storage is None:
            storage = self.service.memories.storage
        backfill = self.backfill
        degraded = storage.state != "ok" or (
            self.service.embedder is not None and backfill is not None and bool(backfill.last_error)
        )
        liveness: dict[str, Any] = {
            "status": "degraded" if degraded else "ok",
            "version": __version__,
            "uptime_seconds": self._uptime() if uptime is None else uptime,
        }
        if storage.state != "ok":
            # A full disk or a damaged file: every caller should learn why writes fail.
            liveness["reason"] = storage.reason
        return liveness

    def _uptime(self) -> float:
        # Whole milliseconds: round(seconds, 3) costs five times as much (it goes through
        # decimal digits), and this runs on every call.
        return round((time.monotonic() - self.started) * 1000) / 1000

    def _describe(self, numbers: StoreNumbers) -> Described:
        """The parts whose owners say what they are now (never cached: a refused secret, an
        embedder that failed, shows in the very next reply)."""
        conversations = self.conversations
        extraction = None if conversations is None else conversations.describe(numbers[2])
        return self._embedder_state(), extraction, self.service.secrets.describe()

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

    def _cached_store_numbers(self) -> StoreNumbers | None:
        """The kept store numbers; None when there are none yet, or this process wrote since
        they were read, or they are older than HEALTH_CACHE_SECONDS."""
        writes, taken_at = self._store_numbers_stamp
        if writes != self.service.memories.write_count or trio.current_time() - taken_at > HEALTH_CACHE_SECONDS:
            return None
        return self._store_numbers

    async def _read_store_numbers(self) -> StoreNumbers:
        while (reading := self._reading) is not None:
            await reading.wait()
            numbers = self._cached_store_numbers()
            if numbers is not None:
                return numbers
            # That read failed or was cancelled, or a write came since it began: read again.
        self._reading = reading = trio.Event()
        try:
            memories = self.service.memories
            stamp = (memories.write_count, trio.current_time())
            self.store_reads += 1
            queue = {} if self.conversations is None else await self.conversations.conversations.status()
            numbers = (await memories.health_counts(), await self.jobs.backlog(), queue)
            self._store_numbers, self._store_numbers_stamp = numbers, stamp
            return numbers
        finally:
            self._reading = None
            reading.set()
