"""Supersession through ``SupersessionStore``: a newer memory replaces an older one, history keeps
the chain, and deferred decisions run as leased jobs."""

from __future__ import annotations

import pytest

from memoryd.errors import SupersedeRefused
from memoryd.store import Scope
from memoryd.store.interfaces import Backend
from memoryd.store.records import EPISODE, Provenance
from memoryd.store.supersession_records import Plan, Ruling
from tests.contract.helpers import note

ALICE = Scope("alice", "c1")


async def test_an_explicit_supersedes_replaces_the_older_memory_and_history_keeps_both(backend: Backend) -> None:
    old = await backend.supersession.add(ALICE, note("I live in Paris"), Plan())
    new = await backend.supersession.add(ALICE, note("I live in Berlin"), Plan(supersedes=old.record.id))
    assert new.superseded == [old.record.id]
    assert [r.content for r in await backend.memories.list(ALICE, limit=10)] == ["I live in Berlin"]
    history = await backend.supersession.history(ALICE, new.record.id)
    assert [r.content for r in history or []] == ["I live in Paris", "I live in Berlin"]
    assert history is not None and history[0].superseded_by == new.record.id
    # The superseded memory is still there for those who ask for it.
    assert (await backend.memories.get(ALICE, old.record.id)) is not None
    assert await backend.supersession.history(Scope("bob"), new.record.id) is None


async def test_superseding_what_the_caller_cannot_see_is_refused_and_writes_nothing(backend: Backend) -> None:
    theirs = await backend.supersession.add(Scope("bob"), note("bob lives in Rome", "bob"), Plan())
    with pytest.raises(SupersedeRefused):
        await backend.supersession.add(ALICE, note("I live in Berlin"), Plan(supersedes=theirs.record.id))
    assert await backend.memories.list(ALICE, limit=10) == []


async def test_a_judge_decides_within_the_add(backend: Backend) -> None:
    await backend.supersession.add(ALICE, note("my favourite colour is blue"), Plan(attributes=("favourite colour",)))

    def judge(older: object, newer: object) -> Ruling:
        return Ruling(True, "same attribute", "rules", "favourite colour")

    new = await backend.supersession.add(
        ALICE, note("my favourite colour is green"), Plan(attributes=("favourite colour",), judge=judge)
    )
    assert len(new.superseded) == 1
    assert [r.content for r in await backend.memories.list(ALICE, limit=10)] == ["my favourite colour is green"]


async def test_a_newer_fact_never_supersedes_an_episode(backend: Backend) -> None:
    # An episode records what was said then; a later fact of the same attribute stands beside it.
    said = note("we talked about my favourite colour: blue", provenance=Provenance(memory_type=EPISODE))
    episode = await backend.supersession.add(ALICE, said, Plan(attributes=("favourite colour",)))

    def judge(older: object, newer: object) -> Ruling:
        return Ruling(True, "same attribute", "rules", "favourite colour")

    new = await backend.supersession.add(
        ALICE, note("my favourite colour is green"), Plan(attributes=("favourite colour",), judge=judge)
    )
    assert new.superseded == []
    kept = await backend.memories.get(ALICE, episode.record.id)
    assert kept is not None and kept.superseded_by is None


async def test_an_upsert_key_replaces_the_memory_of_the_same_key(backend: Backend) -> None:
    await backend.supersession.add(ALICE, note("timezone: Europe/Paris"), Plan(key="timezone"))
    await backend.supersession.add(ALICE, note("timezone: Asia/Tokyo"), Plan(key="timezone"))
    assert [r.content for r in await backend.memories.list(ALICE, limit=10)] == ["timezone: Asia/Tokyo"]


async def test_a_deferred_decision_is_a_leased_job_completed_once(backend: Backend) -> None:
    old = await backend.supersession.add(ALICE, note("I work at Acme"), Plan())
    new = await backend.supersession.add(ALICE, note("I work at Globex"), Plan(defer=True))
    assert not new.superseded
    (job,) = await backend.supersession.claim_jobs(10)
    assert await backend.supersession.claim_jobs(10) == []  # leased: nobody else gets it
    found = await backend.supersession.job_candidates(job, similarity=0.0, limit=5, wait_for_vector=False)
    assert found is not None
    newer, candidates = found
    assert newer.id == new.record.id
    ruling = Ruling(True, "new employer", "llm")
    replaced = await backend.supersession.complete_job(
        job, [(key, ruling) for key, older in candidates if older.id == old.record.id]
    )
    if candidates:
        assert replaced == [old.record.id]
    assert await backend.supersession.claim_jobs(10) == []
    assert await backend.supersession.next_due_ms() is None


async def test_a_job_whose_memory_was_erased_after_its_claim_has_no_candidates(backend: Backend) -> None:
    # forget_all between the worker's claim and its read of the candidates: the worker once
    # failed on the missing row (SQLite: "no row where one was expected"), and the daemon with it.
    await backend.supersession.add(ALICE, note("I work at Acme"), Plan())
    await backend.supersession.add(ALICE, note("I work at Globex"), Plan(defer=True))
    (job,) = await backend.supersession.claim_jobs(10)
    await backend.memories.erase_user("alice", actor="alice", include_group=True, usernames=[])
    for wait in (True, False):
        assert await backend.supersession.job_candidates(job, similarity=0.0, limit=5, wait_for_vector=wait) is None
    assert await backend.supersession.complete_job(job, []) == []
    assert await backend.supersession.claim_jobs(10) == []


@pytest.mark.parametrize("deleted", ["newer", "older"])
async def test_a_ruling_that_arrives_after_a_delete_changes_nothing(backend: Backend, deleted: str) -> None:
    # The model decided about the pair while the user deleted one of them: a deleted newer
    # memory hides nothing, and a deleted older one is not brought back as superseded history.
    old = await backend.supersession.add(ALICE, note("I work at Acme"), Plan(attributes=("employer",)))
    new = await backend.supersession.add(ALICE, note("I work at Globex"), Plan(attributes=("employer",), defer=True))
    (job,) = await backend.supersession.claim_jobs(10)
    found = await backend.supersession.job_candidates(job, similarity=0.0, limit=5, wait_for_vector=False)
    assert found is not None and [older.id for _, older in found[1]] == [old.record.id]
    gone, kept = (new, old) if deleted == "newer" else (old, new)
    assert await backend.memories.delete(ALICE, gone.record.id) == gone.record.id
    replaced = await backend.supersession.complete_job(
        job, [(r, Ruling(True, "new employer", "llm")) for r, _ in found[1]]
    )
    assert replaced == []
    assert [r.id for r in await backend.memories.list(ALICE, limit=10)] == [kept.record.id]
    assert await backend.memories.get(ALICE, gone.record.id) is None
    assert await backend.supersession.claim_jobs(10) == []
