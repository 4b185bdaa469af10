"""system.health's kept reply (service/health.py): after every kind of change, the bytes a call
is answered with equal the report built afresh from the live objects, byte for byte, but for
the two values written into them on every call (the uptime and the server's counters)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from memoryd import errors
from memoryd.auth import Authenticator
from memoryd.embed import OllamaEmbedder
from memoryd.embed.batcher import CoalescingEmbedder
from memoryd.errors import EmbedderError, InvalidParams
from memoryd.rpc.dispatch import NOT_NOW, CallContext
from memoryd.server.wiring import Services, build_services
from memoryd.service.health import HealthReporter
from memoryd.service.params import AddParams, DeleteParams, HealthParams, ObserveParams
from memoryd.store.sqlite import Store
from memoryd.store.visibility import Scope
from tests.conftest import make_config
from tests.disk_faults import build_store, corrupt_mid_file
from tests.fake_backends import FakeBackend, Reply

PARAMS = HealthParams()
TRUSTED = CallContext(peer_uid=os.getuid())
ALICE = {"user_id": "alice"}
SECRET = "ghp_" + "a1B2c3D4e5" * 4


class ServerCounters:
    """Stands in for ``RpcServer.stats``: a different answer on every call, as a live server's."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> bytes:
        self.calls += 1
        return b'{"requests_total":%d,"connections_by_uid":{"0":1}}' % self.calls


def services_for(
    base: Path, store: Store, embedder: Any = None, authenticator: Authenticator | None = None, **config: Any
) -> Services:
    settings = make_config(base, **config)
    authenticator = authenticator or Authenticator.from_config(settings.auth)
    return build_services(settings, store, embedder, None, authenticator, ServerCounters())


async def answer(health: HealthReporter, ctx: CallContext = TRUSTED) -> bytes:
    """The reply's result as sent: inline when the store's numbers are kept, else in a task."""
    reply = health.health_now(PARAMS, ctx)
    if reply is NOT_NOW:
        reply = await health.health(PARAMS, ctx)
    return reply if isinstance(reply, bytes) else msgspec.json.encode(reply)


async def assert_answer_is_fresh(health: HealthReporter) -> dict[str, Any]:
    """One call's bytes are the fresh report's encoding (with that call's uptime and server part)."""
    sent = await answer(health)
    reply = msgspec.json.decode(sent)
    fresh = health.report_afresh()
    # The server's counters are read anew for every call: the fresh report's came one read later.
    assert fresh["server"]["requests_total"] == reply["server"]["requests_total"] + 1
    fresh["uptime_seconds"], fresh["server"] = reply["uptime_seconds"], reply["server"]
    assert sent == msgspec.json.encode(fresh)
    return reply


@pytest.fixture
def store(short_tmp: Path) -> Iterator[Store]:
    with Store(short_tmp / "memory.db", readers=1) as opened:
        yield opened


async def test_the_kept_reply_follows_adds_deletes_a_refused_secret_and_the_conversation_queue(
    short_tmp: Path, store: Store
) -> None:
    services = services_for(short_tmp, store)
    health, memory = services.health, services.health.service
    first = await assert_answer_is_fresh(health)
    assert first["counts"]["memories_active"] == 0
    # Inline (no store read) and reused: the same bytes but for the two live values.
    assert health.health_now(PARAMS, TRUSTED) is not NOT_NOW
    again = await assert_answer_is_fresh(health)
    assert again["server"]["requests_total"] > first["server"]["requests_total"]

    added = await memory.add(AddParams(**ALICE, content="wife Sarah likes Italian food"), TRUSTED)
    assert (await assert_answer_is_fresh(health))["counts"]["memories_active"] == 1
    await memory.add(AddParams(**ALICE, content="allergic to peanuts"), TRUSTED)
    assert (await assert_answer_is_fresh(health))["counts"]["memories_active"] == 2
    await memory.delete(DeleteParams(**ALICE, memory_id=added["id"]), TRUSTED)
    after_delete = await assert_answer_is_fresh(health)
    assert after_delete["counts"]["memories_active"] == 1
    assert after_delete["counts"]["memories_deleted"] == 1

    # Refused: nothing written, the store's numbers stay kept, the secrets part changes at once.
    with pytest.raises(InvalidParams):
        await memory.add(AddParams(**ALICE, content=f"my token {SECRET}"), TRUSTED)
    assert health.health_now(PARAMS, TRUSTED) is not NOT_NOW
    refused = await assert_answer_is_fresh(health)
    assert refused["secrets"]["refused"] == 1 and refused["secrets"]["by_kind"]

    conversations = health.conversations
    assert conversations is not None
    message = {"role": "user", "content": "we moved to Lisbon in May", "id": "m1"}
    await conversations.observe(msgspec.convert({**ALICE, "messages": [message]}, ObserveParams), TRUSTED)
    observed = await assert_answer_is_fresh(health)
    assert observed["extraction"]["messages_held"] == 1
    # The extraction counters live in objects that write nothing to the store.
    learner = conversations.extractor.learner
    learner.stored_total += 3
    assert (await assert_answer_is_fresh(health))["extraction"]["memories_stored_since_start"] == 3
    learner.embedding_seconds += 0.0123456789
    assert (await assert_answer_is_fresh(health))["extraction"]["fact_embedding_seconds_since_start"] == 0.012346


async def test_the_kept_reply_follows_the_embedder_and_the_backfill(short_tmp: Path, store: Store) -> None:
    with FakeBackend("ollama") as backend:
        inner = OllamaEmbedder(backend.url, "nomic-embed-text", timeout=2.0, backoff=0.01, max_backoff=0.05)
        embedder = CoalescingEmbedder(inner)
        services = services_for(short_tmp, store, embedder)
        health, backfill = services.health, services.backfill
        assert backfill is not None
        with trio.fail_after(10):
            await embedder.start()
            first = await assert_answer_is_fresh(health)
            assert first["status"] == "ok" and first["embedder"]["state"] == "idle"

            await embedder.embed(["hello"])  # a real backend call
            ok = await assert_answer_is_fresh(health)
            assert ok["embedder"]["state"] == "ok"

            backend.script.extend([Reply(status=400, body=b'{"error": "model not found"}')])
            with pytest.raises(EmbedderError):
                await embedder.embed(["again"])
            failed = await assert_answer_is_fresh(health)
            assert failed["embedder"]["state"] == "error" and failed["embedder"]["last_error"]

            # The backfill's own error degrades the status; a NUL in its text must not be taken
            # for one of the kept reply's holes (msgspec escapes it inside a string).
            backfill.last_error = "backend said \x00 and hung up"
            degraded = await assert_answer_is_fresh(health)
            assert degraded["status"] == "degraded"
            assert degraded["embedder"]["last_error"] == "backend said \x00 and hung up"
            backfill.last_error = None
            backfill.embedded_total += 5
            back = await assert_answer_is_fresh(health)
            assert back["status"] == "ok" and back["embedder"]["embedded_since_start"] == 5
            await embedder.aclose()


async def test_a_store_found_damaged_turns_the_kept_reply_degraded(short_tmp: Path) -> None:
    db_path = short_tmp / "memoryd.db"
    build_store(db_path)
    corrupt_mid_file(db_path)
    # Opened without the start-up check, as a daemon would be that found nothing yet.
    with Store(db_path, readers=1) as store:
        health = services_for(short_tmp, store).health
        assert (await assert_answer_is_fresh(health))["status"] == "ok"
        for query in ("alpha", "beta gamma", "memory", "kappa sigma"):
            try:
                await store.memories.list(Scope("alice"), limit=10_000)
                await store.memories.search(Scope("alice"), query, limit=50)
            except errors.StoreCorrupt:
                pass
        assert store.memories.storage.state == "corrupt", "the overwritten pages were never read"
        damaged = await assert_answer_is_fresh(health)
        assert damaged["status"] == "degraded" and "memoryd check" in damaged["reason"]
        assert damaged["storage"]["state"] == "corrupt"


async def test_the_configured_secrets_mode_and_liveness_only_for_untrusted_callers(
    short_tmp: Path, store: Store
) -> None:
    token_mode = Authenticator("token", b"s" * 32, trusted_uids=[os.getuid()])
    health = services_for(short_tmp, store, authenticator=token_mode, extraction={"secrets": "redact"}).health
    untrusted = msgspec.json.decode(await answer(health, CallContext(peer_uid=os.getuid() + 1)))
    assert set(untrusted) == {"status", "version", "uptime_seconds"}
    assert (await assert_answer_is_fresh(health))["secrets"]["mode"] == "redact"
    await health.service.add(AddParams(**ALICE, content=f"my token {SECRET}"), TRUSTED)
    assert (await assert_answer_is_fresh(health))["secrets"]["redacted"] == 1


async def test_callers_that_find_the_numbers_stale_together_share_one_store_read(short_tmp: Path, store: Store) -> None:
    health = services_for(short_tmp, store).health
    await assert_answer_is_fresh(health)
    await health.service.add(AddParams(**ALICE, content="a write makes the kept numbers stale"), TRUSTED)
    reads = health.store_reads
    replies: list[Any] = []

    async def poll() -> None:
        replies.append(msgspec.json.decode(await answer(health)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(poll)
    assert health.store_reads == reads + 1
    assert [reply["counts"]["memories_active"] for reply in replies] == [1] * 8
    # Stale again after another write: the next caller reads, once.
    await health.service.add(AddParams(**ALICE, content="and another"), TRUSTED)
    assert (await assert_answer_is_fresh(health))["counts"]["memories_active"] == 2
    assert health.store_reads == reads + 2
