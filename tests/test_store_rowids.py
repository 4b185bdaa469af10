"""Store: a memory's rowid names one memory for good.

Jobs, vector rows, people links and the in-memory scan copies name memories by rowid, and a
job's answer may come after its memory was erased.  SQLite without AUTOINCREMENT hands the
highest rowid plus one to a new row, so the newest memory's rowid would come back after it was
deleted (an erasure, gc, an episode's retention) and late work meant for it would land on
whichever memory, of whichever user, was added next.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memoryd.config import SupersessionConfig
from memoryd.service.supersession import Supersession
from memoryd.store import Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.schema import ladder as schema
from memoryd.store.supersession_records import Ruling
from tests.store_helpers import note, sql

DIM = 8
ALICE, BOB = Scope("alice"), Scope("bob")


def rowid_of(path: Path, memory_id: str) -> int:
    [(rowid,)] = sql(path, "SELECT rowid FROM memories WHERE id = ?", (memory_id,))
    return int(rowid)


async def test_the_rowid_of_an_erased_newest_memory_is_never_given_again(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db", readers=1) as store:
        kept, _ = await store.memories.add(note("Bob plays the cello", "bob"))
        erased, _ = await store.memories.add(note("my locker code is 7731", "alice"))
        store.maintenance.erase_user("alice", actor="alice")
        after, _ = await store.memories.add(note("Bob likes green tea", "bob"))
        assert rowid_of(store.path, after.id) > rowid_of(store.path, kept.id) + 1
    with Store(tmp_path / "m.db", readers=1) as store:  # the floor is in the file, not the process
        store.maintenance.erase_user("bob", actor="bob")  # the table is empty now
        again, _ = await store.memories.add(note("Carol swims", "carol"))
        assert rowid_of(store.path, again.id) == 4


async def test_gc_of_the_newest_memory_leaves_its_rowid_unused(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db", readers=1) as store:
        first, _ = await store.memories.add(note("first"))
        newest, _ = await store.memories.add(note("newest"))
        newest_rowid = rowid_of(store.path, newest.id)
        assert await store.memories.delete(ALICE, newest.id) == newest.id
        sql(store.path, "UPDATE memories SET deleted_at_ms = 1 WHERE deleted_at_ms IS NOT NULL")  # long ago
        store.maintenance.gc(retention_ms=1000)
        assert sql(store.path, "SELECT count(*) FROM memories WHERE rowid = ?", (newest_rowid,)) == [(0,)]
        later, _ = await store.memories.add(note("later"))
        assert rowid_of(store.path, later.id) == newest_rowid + 1
        assert rowid_of(store.path, first.id) < newest_rowid


async def test_a_late_embedding_of_an_erased_memory_leaves_the_next_users_memory_alone(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db", readers=1) as store:
        store.configure_vector_space("test:m", DIM)
        await store.memories.add(note("my locker code is 7731", "alice"))
        [stale] = await store.jobs.claim_embed(10)
        store.maintenance.erase_user("alice", actor="alice")
        bobs, _ = await store.memories.add(note("Bob likes green tea", "bob"))
        assert sql(store.path, "SELECT job_id FROM jobs") == [(stale.job_id,)]  # job ids do come back
        assert await store.jobs.complete_embed([(stale, np.ones(DIM, np.float32))]) == 0
        [job] = await store.jobs.claim_embed(10)
        assert job.memory_id == bobs.id and job.content == "Bob likes green tea"


async def test_a_late_supersession_ruling_of_an_erased_memory_never_touches_the_next_users_memories(
    tmp_path: Path,
) -> None:
    """Alice's newest memory's LLM ruling (it replaces her older one) comes back after she
    erased everything and Bob added two memories: Bob's older memory must not be replaced."""
    with Store(tmp_path / "m.db", readers=1) as store:
        deferred = Supersession(store.supersession, SupersessionConfig(), use_llm=True)
        older = await deferred.store(ALICE, note("Lives near the old harbour", "alice"))
        await deferred.store(ALICE, note("Has a flat by the docks", "alice"))
        claimed = await store.supersession.claim_jobs(10)
        assert len(claimed) == 2
        # The worker's ruling on the newer memory's job (while the LLM thinks, Alice erases).
        rulings = [(rowid_of(store.path, older.record.id), Ruling(True, "moved", "llm"))]
        store.maintenance.erase_user("alice", actor="alice")
        bobs_older = await deferred.store(BOB, note("Lives in Leeds", "bob"))
        await deferred.store(BOB, note("Has a house in York", "bob"))
        assert await store.supersession.complete_job(claimed[1], rulings) == []
        kept = await store.memories.get(BOB, bobs_older.record.id)
        assert kept is not None and kept.superseded_by is None


async def test_a_store_from_before_the_floor_gets_it_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path, readers=1) as store:
        old, _ = await store.memories.add(note("kept from before"))
        newest, _ = await store.memories.add(note("newest"))
    sql(path, "DROP TRIGGER memories_rowid_floor")
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m016_memory_rowids_never_reused)}")
    with Store(path, readers=1) as store:
        assert sql(path, "PRAGMA user_version") == [(schema.LATEST,)]
        assert (await store.memories.get(ALICE, old.id)) is not None
        newest_rowid = rowid_of(path, newest.id)
        store.maintenance.erase_user("alice", actor="alice")
        later, _ = await store.memories.add(note("after the upgrade"))
        assert rowid_of(path, later.id) == newest_rowid + 1
