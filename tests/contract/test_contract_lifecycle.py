"""The whole store through ``Maintenance``: expiry, gc, eviction, export/import, stats, housekeeping."""

from __future__ import annotations

import io

from memoryd.admin.import_file import parse_header, parse_line, read_lines
from memoryd.store import Scope
from memoryd.store.admin_records import PersonLine
from memoryd.store.interfaces import Backend
from memoryd.store.supersession_records import Plan
from tests.contract.helpers import embed_all, note, unit
from tests.store_helpers import Clock

T0 = 1_700_000_000_000
DAY = 86_400_000
ALICE = Scope("alice")


async def test_an_expired_memory_is_hidden_marked_once_and_removed_by_gc_after_retention(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    short, _ = await backend.memories.add(note("short lived", expires_at_ms=T0 + DAY))
    await backend.memories.add(note("long lived"))
    clock.at = T0 + 2 * DAY
    assert [r.content for r in await backend.memories.list(ALICE, limit=10)] == ["long lived"]
    assert await backend.memories.get(ALICE, short.id) is None
    assert [r.content for r in await backend.memories.list(ALICE, limit=10, include_expired=True)] == [
        "long lived",
        "short lived",
    ]
    assert backend.maintenance.mark_expired() == 1
    assert backend.maintenance.mark_expired() == 0
    assert backend.maintenance.gc(retention_ms=30 * DAY).purged == 0  # within retention
    clock.at = T0 + 40 * DAY
    dry = backend.maintenance.gc(retention_ms=30 * DAY, dry_run=True)
    assert dry.purged == 1
    report = backend.maintenance.gc(retention_ms=30 * DAY)
    assert report.purged_by_reason["expired"] == 1
    assert [r.content for r in await backend.memories.list(ALICE, limit=10, include_expired=True)] == ["long lived"]


async def test_gc_removes_deleted_and_superseded_memories_past_retention(backend: Backend, clock: Clock) -> None:
    clock.at = T0
    gone, _ = await backend.memories.add(note("deleted one"))
    await backend.memories.delete(ALICE, gone.id)
    old = await backend.supersession.add(ALICE, note("I live in Paris"), Plan())
    await backend.supersession.add(ALICE, note("I live in Berlin"), Plan(supersedes=old.record.id))
    clock.at = T0 + 31 * DAY
    report = backend.maintenance.gc(retention_ms=30 * DAY)
    assert (report.purged_by_reason["deleted"], report.purged_by_reason["superseded"]) == (1, 1)
    assert await backend.supersession.history(ALICE, old.record.id) is None


async def test_eviction_keeps_each_scope_within_its_limit_sparing_recent_memories(
    backend: Backend, clock: Clock
) -> None:
    for i in range(6):
        clock.at = T0 + i * DAY
        await backend.memories.add(note(f"alice {i}"))
    await backend.memories.add(note("bob's only one", "bob"))
    clock.at = T0 + 30 * DAY
    report = backend.maintenance.enforce_max_entries(per_user=4, per_chat=0, protect_recent_ms=7 * DAY)
    assert report.evicted == 2 and set(report.scopes) == {"u:alice"}
    assert len(await backend.memories.list(ALICE, limit=10)) == 4
    assert len(await backend.memories.list(Scope("bob"), limit=10)) == 1
    assert backend.maintenance.enforce_max_entries(per_user=0, per_chat=0, protect_recent_ms=0).evicted == 0


async def test_export_and_import_round_trip(backend: Backend, another: Backend, clock: Clock) -> None:
    clock.at = T0
    await backend.memories.add(note("I like green tea", subjects=["tea"]))
    clock.at += 1000
    await backend.memories.add(note("team lunch on fridays", "carol", chat_id="team", shared=True))
    clock.at += 1000
    record, _ = await backend.memories.add(note("My wife Sarah loves jazz"))
    await backend.people.learn("alice", record.id, record.content, [], ("alice",))
    out = io.BytesIO()
    assert backend.maintenance.export(out.write, user=None) == 3
    lines = read_lines(out.getvalue().splitlines(keepends=True))
    parse_header(*next(lines))
    parsed = [parse_line(number, raw) for number, raw in lines]
    report = another.maintenance.import_memories(parsed)
    assert (report.imported, report.people.imported) == (3, 1)
    again = another.maintenance.import_memories(parsed)
    assert (again.imported, again.already_present) == (0, 3)  # re-running adds nothing
    for scope in (ALICE, Scope("alice", "team")):
        before = [(r.id, r.content, r.subjects, r.created_at) for r in await backend.memories.list(scope, limit=10)]
        after = [(r.id, r.content, r.subjects, r.created_at) for r in await another.memories.list(scope, limit=10)]
        assert after == before
    assert [p.name for p in await another.people.people_of("alice")] == ["Sarah"]
    # Vectors are not exported: the importing store queues their embedding.
    assert await embed_all(another, lambda content: unit(1)) == 3


async def test_stats_count_memories_by_state_and_scope(backend: Backend) -> None:
    gone, _ = await backend.memories.add(note("gone"))
    await backend.memories.delete(ALICE, gone.id)
    await backend.memories.add(note("kept"))
    await backend.memories.add(note("team", "carol", chat_id="team", shared=True))
    stats = backend.maintenance.stats()
    assert stats["memories"]["active"] == 2 and stats["memories"]["deleted"] == 1
    assert stats["by_scope"]["group"]["active"] == 1


async def test_housekeeping_and_access_counts(backend: Backend) -> None:
    record, _ = await backend.memories.add(note("tea"))
    await backend.memories.get(ALICE, record.id)
    assert await backend.maintenance.flush_hits() == 1
    assert await backend.maintenance.flush_hits() == 0
    assert backend.maintenance.maintain().complete
    assert backend.maintenance.maintain(compact=True, release_space=True).complete
    assert [f.ok for f in backend.maintenance.check()] == [True] * len(backend.maintenance.check())


async def test_an_import_creates_no_person_past_max_people_and_imports_the_rest(
    backend: Backend, another: Backend, clock: Clock
) -> None:
    clock.at = T0
    for text in ("My wife Sarah loves jazz", "My brother Tom plays chess", "My friend Ines runs"):
        record, _ = await backend.memories.add(note(text))
        await backend.people.learn("alice", record.id, record.content, [], ("alice",))
    bob, _ = await backend.memories.add(note("My sister Uma sings", "bob"))
    await backend.people.learn("bob", bob.id, bob.content, [], ("bob",))
    out = io.BytesIO()
    backend.maintenance.export(out.write, user=None)
    lines = read_lines(out.getvalue().splitlines(keepends=True))
    parse_header(*next(lines))
    parsed = [parse_line(number, raw) for number, raw in lines]
    # The target already knows one of alice's people by name, and one other person of hers.
    known, _ = await another.memories.add(note("Sarah is my wife"))
    await another.people.learn("alice", known.id, known.content, ["Sarah"], ("alice",))
    other, _ = await another.memories.add(note("My cousin Lea paints"))
    await another.people.learn("alice", other.id, other.content, [], ("alice",))

    report = another.maintenance.import_memories(parsed, max_people=3)
    assert report.imported == 4  # every memory, whatever happens to the people
    people = report.people
    # Sarah merges into the one the target has; of Tom and Ines (exported in either order) the
    # first fits as the third, the other would be a fourth; bob's one person is within his bound.
    assert (people.imported, people.merged, len(people.refused)) == (2, 1, 1)
    [refused] = [line.name for line in parsed if isinstance(line, PersonLine) and line.id in people.refused]
    assert refused in ("Tom", "Ines")
    [fitted] = {"Tom", "Ines"} - {refused}
    assert sorted(p.name for p in await another.people.people_of("alice")) == sorted(["Lea", "Sarah", fitted])
    assert [p.name for p in await another.people.people_of("bob")] == ["Uma"]
    # The refused line's memory is in, without a link to a person.
    theirs = [r for r in await another.memories.list(ALICE, limit=10) if refused in r.content]
    assert len(theirs) == 1
    # Without a bound (memoryd migrate copies a whole store), every person goes in.
    again = another.maintenance.import_memories(parsed)
    assert (again.people.imported, again.people.refused) == (1, [])


async def test_eviction_among_equals_added_in_one_millisecond_takes_the_first_added(
    backend: Backend, clock: Clock
) -> None:
    clock.at = T0
    added = [(await backend.memories.add(note(f"remark {i}")))[0].id for i in range(8)]
    report = backend.maintenance.enforce_max_entries(per_user=5, per_chat=0, protect_recent_ms=0)
    assert report.evicted == 3
    assert sorted(r.id for r in await backend.memories.list(ALICE, limit=10)) == sorted(added[3:])


async def test_health_counts_stay_exact_through_every_kind_of_write(
    backend: Backend, another: Backend, clock: Clock
) -> None:
    """system.health's memory counts after adds, a duplicate, supersession, deletes, expiry,
    eviction, gc, erasure and an import: what the writes make them, and what a full count
    (``stats``) finds."""

    async def counts() -> tuple[int, int, int]:
        found = await backend.memories.health_counts()
        whole = backend.maintenance.stats()["memories"]
        active, expired, deleted = found["memories_active"], found["memories_expired"], found["memories_deleted"]
        assert (active + expired, deleted) == (
            whole["active"] + whole["expired"] + whole["superseded"],
            whole["deleted"],
        )
        return active, expired, deleted

    clock.at = T0
    assert await counts() == (0, 0, 0)
    for i in range(5):
        await backend.memories.add(note(f"alice {i}"))
    await backend.memories.add(note("alice 0"))  # a duplicate refreshes, adds nothing
    await backend.memories.add(note("soon gone", expires_at_ms=T0 + DAY))
    bobs = [(await backend.memories.add(note(f"bob {i}", "bob")))[0] for i in range(3)]
    await backend.memories.add(note("team lunch", "bob", chat_id="team", shared=True))
    assert await counts() == (10, 0, 0)
    old = await backend.supersession.add(ALICE, note("I live in Paris"), Plan())
    await backend.supersession.add(ALICE, note("I live in Berlin"), Plan(supersedes=old.record.id))
    assert await counts() == (12, 0, 0)  # a superseded memory is still live
    await backend.memories.delete(Scope("bob"), bobs[0].id)
    assert await backend.memories.delete(Scope("bob"), bobs[0].id) is None  # twice deletes once
    assert await counts() == (11, 0, 1)
    clock.at = T0 + 2 * DAY
    assert await counts() == (10, 1, 1)
    backend.maintenance.mark_expired()
    assert await counts() == (10, 1, 1)
    clock.at = T0 + 3 * DAY
    assert backend.maintenance.enforce_max_entries(per_user=4, per_chat=0, protect_recent_ms=0).evicted > 0
    evicted = await counts()
    assert evicted[0] + evicted[1] < 11 and evicted[2] > 1
    clock.at = T0 + 40 * DAY
    purged = backend.maintenance.gc(retention_ms=30 * DAY).purged
    assert purged >= evicted[2] and await counts() == (evicted[0] + evicted[1] - (purged - evicted[2]), 0, 0)
    live = (await counts())[0]
    erased = backend.maintenance.erase_user("bob", actor="operator", include_group=True)
    assert await counts() == (live - erased["memories"] - erased["group_memories_deleted"], 0, 0)
    assert erased["memories"] + erased["group_memories_deleted"] == 3  # two personal, one group memory
    out = io.BytesIO()
    exported = backend.maintenance.export(out.write, user=None)
    lines = read_lines(out.getvalue().splitlines(keepends=True))
    parse_header(*next(lines))
    assert another.maintenance.import_memories([parse_line(n, raw) for n, raw in lines]).imported == exported
    imported = await another.memories.health_counts()
    assert (imported["memories_active"], imported["memories_deleted"]) == ((await counts())[0], 0)
