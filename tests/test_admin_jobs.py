"""`memoryd jobs retry` and the extraction numbers of `memoryd stats`, as real processes."""

from __future__ import annotations

import json
from pathlib import Path

from memoryd.store import SessionContext, SessionRef, StoredMessage
from memoryd.store.sqlite import Store
from tests.admin_cli import memoryd, text
from tests.store_helpers import note, sql


async def park_one_and_fail_one(data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    with Store(data / "memoryd.db", readers=1) as store:
        store.configure_vector_space("test:4d", 4)
        message = StoredMessage(0, "user", "I like tea", "m1", None, None, None, None)
        session = SessionRef("alice", None, None)
        await store.conversations.observe(session, SessionContext(), [message], extract_after_ms=0)
        (job,) = await store.conversations.claim(1, 50)
        await store.conversations.fail(job, "LlmRefused: 401 bad key", park=True)
        await store.memories.add(note("alice likes tea", "alice"))
        await store.jobs.fail(await store.jobs.claim_embed(1), "EmbedderError: down")


async def test_stats_shows_the_extraction_backlog_parked_jobs_and_the_last_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await park_one_and_fail_one(data)
    done = memoryd("stats", "--json", data_dir=data)
    assert done.returncode == 0, text(done)
    extraction = json.loads(done.stdout)["extraction"]
    assert extraction == {
        "pending_sessions": 0, "failing_sessions": 0, "parked_sessions": 1,
        "last_error": "LlmRefused: 401 bad key", "messages_held": 1,
    }  # fmt: skip
    table = memoryd("stats", data_dir=data).stdout.decode()
    assert "1 parked" in table and "last error: LlmRefused: 401 bad key" in table


async def test_jobs_retry_requeues_parked_extractions_and_failing_embeddings(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await park_one_and_fail_one(data)
    done = memoryd("jobs", "retry", "--json", data_dir=data)
    assert done.returncode == 0, text(done)
    assert json.loads(done.stdout) == {"requeued": {"extract": 1, "embed": 1}}
    assert sql(data / "memoryd.db", "SELECT parked_at_ms, attempts FROM extraction_jobs") == [(None, 0)]
    assert sql(data / "memoryd.db", "SELECT attempts FROM jobs") == [(0,)]
    again = memoryd("jobs", "retry", data_dir=data)
    assert again.stdout.decode().startswith("re-queued 0 parked extraction jobs and 0 failing embedding jobs")
