"""Supersession through the real add path (store + rules) where the wire cannot reach yet:
provenance (who said it), the labelled pairs, the audit trail, vectors of superseded memories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pytest

from memoryd.config import SupersessionConfig
from memoryd.knowledge.evaluate import DEFAULT_PAIRS, LabelledPair, load_pairs
from memoryd.service.supersession import Supersession
from memoryd.store import Provenance, Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.admin.transfer import MemoryLine
from memoryd.store.sqlite.vectors import vectors as store_vectors
from tests.store_helpers import note, sql

ALICE = Scope("alice")


@pytest.fixture
def rules(store: Store) -> Supersession:
    return Supersession(store.supersession, SupersessionConfig(), use_llm=False)


def said_by(speaker: str | None) -> Provenance | None:
    return None if speaker is None else Provenance(source_username=speaker)


async def test_first_person_supersedes_hearsay_but_not_the_reverse(rules: Supersession) -> None:
    hearsay = await rules.store(
        ALICE, note("Sarah's favorite color is red", subjects=["Sarah"], provenance=said_by("tom"))
    )
    own = await rules.store(ALICE, note("My favorite color is blue", subjects=["Sarah"], provenance=said_by("Sarah")))
    assert own.superseded == [hearsay.record.id]
    later_hearsay = await rules.store(
        ALICE, note("Sarah's favorite color is green", subjects=["Sarah"], provenance=said_by("tom"))
    )
    assert later_hearsay.superseded == []


async def test_the_owners_own_username_is_not_hearsay(rules: Supersession) -> None:
    red = await rules.store(ALICE, note("My favorite color is red"))
    blue = await rules.store(ALICE, note("My favorite color is blue", provenance=said_by("alice")))
    assert blue.superseded == [red.record.id]


async def test_supersession_is_audited_with_ids_and_no_contents(store: Store, rules: Supersession) -> None:
    red = await rules.store(ALICE, note("My favorite color is red"))
    blue = await rules.store(ALICE, note("My favorite color is blue"))
    events = sql(store.path, "SELECT memory_id, event, actor, detail FROM events WHERE event = 'superseded'")
    assert len(events) == 1
    memory_id, _, actor, detail = events[0]
    assert (memory_id, actor) == (red.record.id, "alice")
    assert blue.record.id in detail and "favorite:color" in detail
    assert "red" not in detail and "blue" not in detail


async def test_a_superseded_memory_loses_its_vector_and_embed_job(tmp_path: Path) -> None:
    with Store(tmp_path / "v.db", readers=1) as store:
        store.configure_vector_space("test-model", 4)
        rules = Supersession(store.supersession, SupersessionConfig(), use_llm=False)
        red = await rules.store(ALICE, note("My favorite color is red"))
        jobs = await store.jobs.claim_embed(10)
        await store.jobs.complete_embed([(job, np.ones(4, dtype=np.float32)) for job in jobs])
        table = store_vectors.table_name(1)
        assert sql(store.path, f"SELECT count(*) FROM {table}") == [(1,)]
        blue = await rules.store(ALICE, note("My favorite color is blue"))
        assert blue.superseded == [red.record.id]
        assert sql(store.path, f"SELECT memory_rowid FROM {table}") == []
        # Only blue's embed job is left; red's vector never comes back.
        assert sql(store.path, "SELECT m.id FROM jobs JOIN memories AS m ON m.rowid = jobs.memory_rowid") == [
            (blue.record.id,)
        ]
        assert [finding.name for finding in store.lifecycle.check() if not finding.ok] == []


def labelled(paths: list[Path]) -> list[LabelledPair]:
    return [pair for path in paths for pair in load_pairs(path)]


#: Every labelled set: the rules' own, the development set of fresh wording, the held-out ones.
PAIR_FILES = sorted(DEFAULT_PAIRS.parent.glob("supersession_*.jsonl"))


async def test_the_add_path_agrees_with_the_pure_rules_on_the_labelled_pairs(rules: Supersession) -> None:
    """Every labelled pair through the real store, each in a scope of its own: the
    integrated decision (candidates by attribute key and subjects, judged in the add's
    transaction) is exactly the pure rules' decision."""
    pairs = labelled(PAIR_FILES)
    assert len(pairs) >= 500 and DEFAULT_PAIRS in PAIR_FILES
    disagreements = []
    for index, pair in enumerate(pairs):
        scope = Scope(f"user{index}")
        old = await rules.store(
            scope,
            note(pair.old, scope.user_id, subjects=list(pair.old_subjects), provenance=said_by(pair.old_speaker)),
        )
        new = await rules.store(
            scope,
            note(pair.new, scope.user_id, subjects=list(pair.new_subjects), provenance=said_by(pair.new_speaker)),
        )
        if (new.superseded == [old.record.id]) != pair.decide().supersedes:
            disagreements.append(pair.note)
    assert disagreements == []


async def test_the_llm_job_finds_candidates_by_meaning_once_the_vector_exists(tmp_path: Path) -> None:
    with Store(tmp_path / "v.db", readers=1) as store:
        store.configure_vector_space("test-model", 4)
        deferred = Supersession(store.supersession, SupersessionConfig(similarity=0.9), use_llm=True)
        near = await deferred.store(ALICE, note("Lives near the old harbour"))
        far = await deferred.store(ALICE, note("Plays the cello"))
        new = await deferred.store(ALICE, note("Has a flat by the docks"))
        assert new.superseded == []  # an LLM decides later: nothing inline
        jobs = await store.supersession.claim_jobs(10)
        assert [job.memory_rowid for job in jobs] == [1, 2, 3]
        waiting = await store.supersession.job_candidates(jobs[2], similarity=0.9, limit=5, wait_for_vector=True)
        assert waiting is None  # its embed job is still pending
        embeds = await store.jobs.claim_embed(10)
        vectors = {near.record.id: [1, 1, 0, 0], far.record.id: [0, 0, 1, 1], new.record.id: [1, 0.9, 0, 0]}
        await store.jobs.complete_embed([(job, np.array(vectors[job.memory_id], np.float32)) for job in embeds])
        found = await store.supersession.job_candidates(jobs[2], similarity=0.9, limit=5, wait_for_vector=True)
        assert found is not None
        record, candidates = found
        assert record.id == new.record.id and [old.id for _, old in candidates] == [near.record.id]


async def test_export_and_import_keep_the_supersession_columns(tmp_path: Path) -> None:
    with Store(tmp_path / "a.db", readers=1) as source:
        rules = Supersession(source.supersession, SupersessionConfig(), use_llm=False)
        await rules.store(ALICE, note("Takes coffee black"), key="coffee")
        await rules.store(ALICE, note("Takes coffee with milk"), key="coffee")
        chunks: list[bytes] = []
        source.lifecycle.export(chunks.append, user=None)
    exported = b"".join(chunks).splitlines()[1:]
    lines = [msgspec.json.decode(line, type=MemoryLine) for line in exported]
    old, new = sorted(lines, key=lambda line: "milk" in line.content)  # the file is ordered by id
    assert (old.key, new.key) == ("coffee", "coffee")
    assert old.superseded_by == new.id and old.superseded_at is not None and old.supersede_reason
    with Store(tmp_path / "b.db", readers=1) as target:
        target.configure_vector_space("test-model", 4)
        report = target.lifecycle.import_memories(lines)
        assert (report.imported, report.embed_jobs) == (2, 1)  # no vector for the old version
        again: list[bytes] = []
        target.lifecycle.export(again.append, user=None)
    assert b"".join(again).splitlines()[1:] == exported


async def test_eviction_takes_superseded_memories_first(store: Store, rules: Supersession) -> None:
    red = await rules.store(ALICE, note("My favorite color is red"))
    await rules.store(ALICE, note("My favorite color is blue"))
    await rules.store(ALICE, note("Waters the plants on Sundays"))
    report = store.lifecycle.enforce_max_entries(per_user=2, per_chat=0, protect_recent_ms=0)
    assert report.evicted == 1
    assert sql(store.path, "SELECT id FROM memories WHERE deleted_at_ms IS NOT NULL") == [(red.record.id,)]


async def test_the_people_hook_lets_the_rules_see_that_my_wife_is_sarah(store: Store) -> None:
    async def alices_people(scope: Scope) -> Callable[[str], str | None] | None:
        assert scope.user_id == "alice"
        known = {"my wife": "person:1", "wife": "person:1", "sarah": "person:1"}
        return lambda phrase: known.get(phrase.casefold().removesuffix("'s"))

    plain = Supersession(store.supersession, SupersessionConfig(), use_llm=False)
    first = await plain.store(ALICE, note("My wife's favorite color is red"))
    assert (await plain.store(ALICE, note("Sarah's favorite color is blue"))).superseded == []
    with_people = Supersession(store.supersession, SupersessionConfig(), use_llm=False, resolver_for=alices_people)
    green = await with_people.store(ALICE, note("Sarah's favorite color is green"))
    assert first.record.id in green.superseded


async def test_a_group_chat_never_replaces_what_it_may_not_see(rules: Supersession) -> None:
    # Learned in a private chat: hidden from group chats by the disclosure rules.  A group chat
    # that states the same attribute (by rule or by key) must neither hide it nor learn its id.
    in_private = Scope("alice", chat_id="dm", chat_type="private")
    in_group = Scope("alice", chat_id="g1", chat_type="group")
    private = Provenance(chat_type="private")
    group = Provenance(chat_type="group")
    red = await rules.store(in_private, note("My favorite color is red", chat_id="dm", provenance=private))
    keyed = await rules.store(in_private, note("Gate code is 1234", chat_id="dm", provenance=private), key="gate-code")
    blue = await rules.store(in_group, note("My favorite color is blue", chat_id="g1", provenance=group))
    other = await rules.store(in_group, note("Gate code is 9999", chat_id="g1", provenance=group), key="gate-code")
    assert blue.superseded == [] and other.superseded == []
    # From the private chat, where both versions are visible, the rules still apply.
    green = await rules.store(in_private, note("My favorite color is green", chat_id="dm", provenance=private))
    assert set(green.superseded) == {red.record.id, blue.record.id}
    assert keyed.record.id not in green.superseded


async def test_the_add_returns_the_short_id_a_later_lookup_gives(store: Store, rules: Supersession) -> None:
    """memory.add takes the short id from its own transaction instead of a read after it: the
    same prefix, also for a duplicate whose id shares its first characters with another's."""
    from memoryd.ids import MIN_PREFIX_LENGTH, new_ulid

    fresh = [await rules.store(ALICE, note(f"note {i}")) for i in range(5)]
    for stored in fresh:
        short = await store.memories.short_ids(ALICE, [stored.record.id])
        assert stored.short_id == short[stored.record.id] == stored.record.id[:MIN_PREFIX_LENGTH]
    # Two ids of one instant (older rows, from before new ids avoided shared prefixes).
    at = 1_700_000_000_000
    for content in ("a", "b"):
        await rules.store(ALICE, note(content))
        sql(store.path, "UPDATE memories SET id = ? WHERE content = ?", (new_ulid(at), content))
    again = await rules.store(ALICE, note("a"))
    assert again.deduplicated
    expected = (await store.memories.short_ids(ALICE, [again.record.id]))[again.record.id]
    assert again.short_id == expected and len(expected) > MIN_PREFIX_LENGTH


async def test_people_are_learned_in_the_add_transaction_when_asked(store: Store, rules: Supersession) -> None:
    stored = await rules.store(ALICE, note("My wife's name is Sarah"), owner_names=("alice",))
    assert stored.people_changed
    [sarah] = await store.people.people_of("alice")
    assert (sarah.name, sarah.relationship) == ("Sarah", "wife")
    mention = await rules.store(ALICE, note("Sarah likes tulips"), owner_names=("alice",))
    assert not mention.people_changed  # linked to Sarah, who is already known
    about = await store.people.memories_about(ALICE, sarah, limit=10)
    assert {record.id for record in about} == {stored.record.id, mention.record.id}
    unasked = await rules.store(ALICE, note("My boss is called Tom"))
    assert not unasked.people_changed and len(await store.people.people_of("alice")) == 1
