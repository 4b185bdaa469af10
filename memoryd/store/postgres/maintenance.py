"""The whole store on PostgreSQL (``interfaces.Maintenance``): expiry, gc past retention,
max_entries eviction, housekeeping, hit counts, stats, consistency checks, export and import.

Long steps run in bounded batches, one short transaction each; the steps are idempotent, so the
maintenance task of every daemon on the database (and ``memoryd gc``) may run them at once.
The export format is the SQLite backend's (``admin_records``), so a file moves between them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import psycopg

from memoryd.errors import StoreUnreachable
from memoryd.ids import iso_from_ms, ms_from_iso
from memoryd.knowledge import attribute_keys, normalise_name
from memoryd.store.admin_records import (
    FORMAT,
    MEMORY_STATES,
    VERSION,
    EvictionReport,
    ExportHeader,
    Finding,
    GcReport,
    ImportReport,
    MemoryLine,
    PeopleReport,
    PersonLine,
)
from memoryd.store.interfaces.maintenance import MaintenanceReport
from memoryd.store.people_records import StoredPerson
from memoryd.store.postgres import eviction, people, schema
from memoryd.store.postgres import jobs as job_rows
from memoryd.store.postgres import memories as rows
from memoryd.store.postgres.db import Database
from memoryd.store.records import PROVENANCE_COLUMNS, NewMemory, Provenance
from memoryd.store.visibility import (
    PERSONAL_PREFIX,
    key_for,
    scope_kind,
)

Conn = psycopg.Connection[Any]
BATCH = 500
ACTOR = "memoryd"
IMPORT_ACTOR = "admin"
_encoder = msgspec.json.Encoder()
_UNLIMITED = 1 << 62
_PROVENANCE = ", ".join(PROVENANCE_COLUMNS)
_EXPORT_COLUMNS = (
    "id, shared, owner, chat_id, source, content, subjects, metadata, confidence, created_at_ms, "
    "updated_at_ms, expires_at_ms, deleted_at_ms, expiry_recorded_ms, superseded_by, access_count, last_access_ms, "
    f"superseded_at_ms, supersede_reason, key, pinned, {_PROVENANCE}"
)
STATE_SQL = (
    "CASE WHEN deleted_at_ms IS NOT NULL THEN 'deleted' WHEN superseded_by IS NOT NULL THEN 'superseded' "
    "WHEN expires_at_ms IS NOT NULL AND expires_at_ms <= %s THEN 'expired' ELSE 'active' END"
)


# -- expiry and gc ---------------------------------------------------------------------------


def mark_expired_batch(conn: Conn, now_ms: int) -> int:
    found = conn.execute(
        "SELECT rowid, id, expires_at_ms, scope_key FROM memories WHERE expires_at_ms <= %s AND deleted_at_ms IS NULL "
        "AND expiry_recorded_ms IS NULL LIMIT %s FOR UPDATE SKIP LOCKED",
        (now_ms, BATCH),
    ).fetchall()
    for rowid, memory_id, expires_at_ms, key in found:
        conn.execute("UPDATE memories SET expiry_recorded_ms = %s WHERE rowid = %s", (now_ms, rowid))
        conn.execute("DELETE FROM jobs WHERE memory_rowid = %s", (rowid,))
        rows.audit(conn, key, memory_id, "expired", ACTOR, now_ms, {"expires_at": iso_from_ms(int(expires_at_ms))})
    return len(found)


def purge_counts(conn: Conn, cutoff_ms: int) -> Counter[str]:
    deleted, expired, superseded = conn.execute(
        "SELECT count(*) FILTER (WHERE deleted_at_ms <= %(c)s), "
        "count(*) FILTER (WHERE expires_at_ms <= %(c)s AND (deleted_at_ms IS NULL OR deleted_at_ms > %(c)s)), "
        "count(*) FILTER (WHERE superseded_at_ms <= %(c)s AND (deleted_at_ms IS NULL OR deleted_at_ms > %(c)s) "
        "AND (expires_at_ms IS NULL OR expires_at_ms > %(c)s)) FROM memories",
        {"c": cutoff_ms},
    ).fetchone() or (0, 0, 0)
    return Counter(deleted=int(deleted), expired=int(expired), superseded=int(superseded))


def fold_counts(conn: Conn) -> None:
    """``memory_counts`` (one row per write, schema M005) as one row: system.health sums it.  One
    daemon at a time (another gc finds the lock taken and leaves it); writes appending rows
    meanwhile are not seen by the DELETE and stay, so the sum never changes."""
    (locked,) = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (schema.MIGRATION_LOCK + 2,)).fetchone() or (
        False,
    )
    if locked:
        conn.execute(
            "WITH gone AS (DELETE FROM memory_counts RETURNING live, deleted) "
            "INSERT INTO memory_counts (live, deleted) SELECT coalesce(sum(live), 0), coalesce(sum(deleted), 0) FROM gone"
        )


def purge_batch(conn: Conn, cutoff_ms: int, now_ms: int) -> Counter[str]:
    doomed: dict[int, tuple[str, str, str]] = {}
    for reason, where in (
        ("deleted", "deleted_at_ms <= %s"),
        ("expired", "expires_at_ms <= %s"),
        ("superseded", "superseded_at_ms <= %s"),
    ):
        if len(doomed) >= BATCH:
            break
        for rowid, memory_id, key in conn.execute(
            f"SELECT rowid, id, scope_key FROM memories WHERE {where} LIMIT %s FOR UPDATE SKIP LOCKED",
            (cutoff_ms, BATCH - len(doomed)),
        ):
            doomed.setdefault(int(rowid), (memory_id, key, reason))
    if not doomed:
        return Counter()
    doomed_rowids = list(doomed)
    rows.drop_derived(conn, doomed_rowids)
    conn.execute(
        "INSERT INTO audit_events (scope_key, memory_id, event, actor, at_ms, detail) "
        "SELECT m.scope_key, m.id, 'added', m.owner, m.created_at_ms, '{}' FROM memories AS m WHERE m.rowid = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM audit_events AS a WHERE a.memory_id = m.id AND a.event IN ('added', 'imported'))",
        (doomed_rowids,),
    )
    conn.execute("DELETE FROM memory_people WHERE memory_rowid = ANY(%s)", (doomed_rowids,))
    conn.execute("DELETE FROM memory_attributes WHERE memory_rowid = ANY(%s)", (doomed_rowids,))
    conn.execute("DELETE FROM memories WHERE rowid = ANY(%s)", (doomed_rowids,))
    for memory_id, key, reason in doomed.values():
        rows.audit(conn, key, memory_id, "purged", ACTOR, now_ms, {"reason": reason})
    return Counter(reason for _, _, reason in doomed.values())


_PRUNABLE = (
    "FROM audit_events AS e WHERE e.memory_id IN (SELECT memory_id FROM audit_events WHERE event = 'purged' AND at_ms < %s) "
    "AND NOT EXISTS (SELECT 1 FROM memories WHERE memories.id = e.memory_id)"
)


def prune_events(conn: Conn, cutoff_ms: int) -> int:
    return int(conn.execute(f"DELETE {_PRUNABLE}", (cutoff_ms,)).rowcount)


def count_prunable_events(conn: Conn, cutoff_ms: int) -> int:
    return int((conn.execute(f"SELECT count(*) {_PRUNABLE}", (cutoff_ms,)).fetchone() or (0,))[0])


# -- stats and checks ------------------------------------------------------------------------


def _states() -> dict[str, int]:
    return dict.fromkeys(MEMORY_STATES, 0)


def collect(conn: Conn, now_ms: int) -> dict[str, Any]:
    totals = _states()
    by_scope = {"personal": _states(), "group": _states()}
    by_user: dict[str, dict[str, int]] = {}
    by_source: dict[str, dict[str, int]] = {}
    for owner, shared, source, state, count in conn.execute(
        f"SELECT owner, shared, source, {STATE_SQL} AS state, count(*) FROM memories GROUP BY 1, 2, 3, 4", (now_ms,)
    ):
        totals[state] += count
        by_scope[scope_kind(bool(shared))][state] += count
        by_user.setdefault(owner, _states())[state] += count
        by_source.setdefault(source, _states())[state] += count
    (chats,) = conn.execute(
        "SELECT count(DISTINCT chat_id) FROM memories WHERE shared AND deleted_at_ms IS NULL"
    ).fetchone() or (0,)
    accessed, hits = conn.execute(
        "SELECT count(*), coalesce(sum(access_count), 0) FROM memories WHERE access_count > 0"
    ).fetchone() or (0, 0)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    generation = meta.get("vector_generation")
    (embedded,) = conn.execute(
        "SELECT count(*) FROM memory_vectors WHERE generation = %s", (int(generation) if generation else -1,)
    ).fetchone() or (0,)
    (failing,) = conn.execute("SELECT count(*) FROM jobs WHERE attempts > 0").fetchone() or (0,)
    (last_error,) = conn.execute("SELECT max(last_error) FROM jobs WHERE last_error IS NOT NULL").fetchone() or (None,)
    (size,) = conn.execute("SELECT pg_database_size(current_database())").fetchone() or (0,)
    from memoryd.store.postgres.conversations import status

    reindex = meta.get("reindex_model")
    if reindex is not None and meta.get("reindex_dim"):
        reindex = f"{reindex} (dim {meta['reindex_dim']})"
    users = sorted(by_user.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    last = meta.get("maintenance_last")
    return {
        "schema_version": schema.schema_version(conn),
        "memories": {"total": sum(totals.values()), **totals},
        "by_scope": {**by_scope, "chats": int(chats)},
        "by_user": [{"user": user, **states} for user, states in users],
        "by_source": dict(sorted(by_source.items(), key=lambda item: (-sum(item[1].values()), item[0]))),
        "access": {"memories_retrieved": int(accessed), "retrievals": int(hits)},
        "embedding": {
            "model": meta.get("vector_model"),
            "dim": int(meta["vector_dim"]) if "vector_dim" in meta else None,
            "generation": int(generation) if generation else None,
            "embedded": int(embedded),
            "reindex_requested": reindex,
        },
        "backlog": {**job_rows.backlog(conn), "failing": int(failing), "last_error": last_error},
        "extraction": status(conn),
        # The shape of the SQLite backend's (the server's WAL is its own business: 0 here).
        "database": {
            "engine": "postgres",
            "path": "PostgreSQL " + str(conn.info.dbname),
            "bytes": int(size),
            "file": int(size),
            "wal": 0,
        },
        "pages": {"page_size": 8192, "pages": int(size) // 8192, "free_pages": 0},
        "last_maintenance": None if last is None else msgspec.json.decode(last),
    }


def check(conn: Conn, now_ms: int) -> list[Finding]:
    findings = [Finding("postgres", True, "the database answered")]
    (stale,) = conn.execute(
        "SELECT count(*) FROM memory_vectors AS v WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = v.scope_key "
        "AND m.rowid = v.rowid AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL)"
    ).fetchone() or (0,)
    findings.append(
        Finding("vectors", True, "every vector belongs to a live memory")
        if not stale
        else Finding("vectors", False, f"{stale} vectors of deleted, superseded or gone memories", int(stale), True)
    )
    (orphans,) = conn.execute(
        "SELECT count(*) FROM jobs AS j WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = j.scope_key "
        "AND m.rowid = j.memory_rowid AND m.deleted_at_ms IS NULL)"
    ).fetchone() or (0,)
    findings.append(
        Finding("jobs", True, "every job belongs to a live memory")
        if not orphans
        else Finding("jobs", False, f"{orphans} jobs of deleted or gone memories", int(orphans), True)
    )
    generation = rows.vector_generation(conn)
    if generation is not None:
        (unqueued,) = conn.execute(
            "SELECT count(*) FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.superseded_by IS NULL "
            "AND (m.expires_at_ms IS NULL OR m.expires_at_ms > %s) AND NOT EXISTS (SELECT 1 FROM memory_vectors AS v "
            "WHERE v.scope_key = m.scope_key AND v.rowid = m.rowid AND v.generation = %s) AND NOT EXISTS "
            "(SELECT 1 FROM jobs AS j WHERE j.scope_key = m.scope_key AND j.memory_rowid = m.rowid AND j.kind = 'embed')",
            (now_ms, generation),
        ).fetchone() or (0,)
        findings.append(
            Finding("vectors.queue", True, "every live memory has a vector or an embed job")
            if not unqueued
            else Finding(
                "vectors.queue", False, f"{unqueued} live memories have no vector and no embed job", int(unqueued), True
            )
        )
    return findings


def repair(conn: Conn, findings: list[Finding], now_ms: int) -> list[str]:
    done: list[str] = []
    wanted = {f.check for f in findings if not f.ok and f.repairable}
    if "vectors" in wanted:
        n = conn.execute(
            "DELETE FROM memory_vectors AS v WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = v.scope_key "
            "AND m.rowid = v.rowid AND m.deleted_at_ms IS NULL AND m.superseded_by IS NULL)"
        ).rowcount
        done.append(f"removed {n} stale vectors")
    if "jobs" in wanted:
        n = conn.execute(
            "DELETE FROM jobs AS j WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.scope_key = j.scope_key "
            "AND m.rowid = j.memory_rowid AND m.deleted_at_ms IS NULL)"
        ).rowcount
        done.append(f"removed {n} orphaned jobs")
    if "vectors.queue" in wanted:
        done.append(f"queued {job_rows.enqueue_missing(conn, now_ms)} embed jobs")
    return done


# -- export and import -----------------------------------------------------------------------


def _ms(value: str | None) -> int | None:
    return None if value is None else ms_from_iso(value)


def export(conn: Conn, write: Callable[[bytes], object], user: str | None, now_ms: int, chunk: int = 1 << 20) -> int:
    """The SQLite backend's export format, from one snapshot (REPEATABLE READ)."""
    buffer = bytearray(_encoder.encode(ExportHeader(FORMAT, VERSION, iso_from_ms(now_ms) or "", user)) + b"\n")
    count = 0
    where, params = ("WHERE owner = %s", (user,)) if user is not None else ("", ())
    with conn.cursor(name="export") as cursor:
        cursor.execute(f"SELECT {_EXPORT_COLUMNS} FROM memories {where} ORDER BY id", params)
        for row in cursor:
            (id_, shared, owner, chat_id, source, content, subjects, metadata, confidence, created, updated, expires,
             deleted, expiry_recorded, superseded_by, access_count, last_access, superseded_at, reason, key, pinned) = row[:21]  # fmt: skip
            provenance = dict(zip(PROVENANCE_COLUMNS, row[21:], strict=True))
            provenance["conversation_private"] = bool(provenance["conversation_private"])
            line = MemoryLine(
                id=id_, scope=scope_kind(bool(shared)), owner=owner, chat_id=chat_id, source=source, content=content,
                subjects=msgspec.json.decode(subjects), metadata=msgspec.json.decode(metadata), confidence=confidence,
                created_at=iso_from_ms(created) or "", updated_at=iso_from_ms(updated) or "", expires_at=iso_from_ms(expires),
                deleted_at=iso_from_ms(deleted), expiry_recorded_at=iso_from_ms(expiry_recorded), superseded_by=superseded_by,
                access_count=access_count, last_access_at=iso_from_ms(last_access), superseded_at=iso_from_ms(superseded_at),
                supersede_reason=reason, key=key, pinned=bool(pinned), **provenance,
            )  # fmt: skip
            _encoder.encode_into(line, buffer, -1)
            buffer += b"\n"
            count += 1
            if len(buffer) >= chunk:
                write(bytes(buffer))
                buffer.clear()
    people_where = "WHERE p.owner = %s" if user is not None else ""
    for id_, owner, name, aliases, relationship, created, updated, linked in conn.execute(
        "SELECT p.id, p.owner, p.name, p.aliases, p.relationship, p.created_at_ms, p.updated_at_ms, "
        "coalesce((SELECT array_agg(m.id ORDER BY m.id) FROM memory_people AS l JOIN memories AS m ON m.rowid = l.memory_rowid "
        f"WHERE l.scope_key = p.scope_key AND l.person_rowid = p.rowid), ARRAY[]::text[]) FROM people AS p {people_where} ORDER BY p.id",
        params,
    ):
        person = PersonLine(
            id=id_, owner=owner, name=name, aliases=msgspec.json.decode(aliases), relationship=relationship,
            created_at=iso_from_ms(created) or "", updated_at=iso_from_ms(updated) or "", memories=list(linked),
        )  # fmt: skip
        _encoder.encode_into(person, buffer, -1)
        buffer += b"\n"
    write(bytes(buffer))
    return count


def import_lines(
    conn: Conn, lines: Iterable[MemoryLine | PersonLine], now_ms: int, max_people: int | None = None
) -> ImportReport:
    """Insert the memories and people whose ids are new, all in this transaction."""
    report = ImportReport()
    generation = rows.vector_generation(conn)
    persons: list[PersonLine] = []
    for line in lines:
        if isinstance(line, PersonLine):
            persons.append(line)
            continue
        shared = line.scope == "group"
        scope_key = key_for(shared=shared, owner=line.owner, chat_id=line.chat_id)
        if conn.execute("SELECT 1 FROM memories WHERE id = %s", (line.id,)).fetchone() is not None:
            report.already_present += 1
            continue
        provenance = Provenance(**{name: getattr(line, name) for name in PROVENANCE_COLUMNS})
        new = NewMemory(content=line.content, owner=line.owner, chat_id=line.chat_id, shared=shared, source=line.source,
                        subjects=list(line.subjects), expires_at_ms=_ms(line.expires_at), metadata=dict(line.metadata),
                        confidence=float(line.confidence), provenance=provenance)  # fmt: skip
        rowid, _ = rows.insert(
            conn, new, now_ms, memory_id=line.id, created_at_ms=ms_from_iso(line.created_at), queue_embed=False
        )
        deleted_at_ms = _ms(line.deleted_at)
        conn.execute(
            "UPDATE memories SET updated_at_ms = %s, deleted_at_ms = %s, expiry_recorded_ms = %s, superseded_by = %s, "
            "access_count = %s, last_access_ms = %s, superseded_at_ms = %s, supersede_reason = %s, key = %s, pinned = %s "
            "WHERE rowid = %s",
            (ms_from_iso(line.updated_at), deleted_at_ms, _ms(line.expiry_recorded_at), line.superseded_by, line.access_count,
             _ms(line.last_access_at), _ms(line.superseded_at), line.supersede_reason, line.key, bool(line.pinned), rowid),
        )  # fmt: skip
        report.imported += 1
        rows.audit(conn, scope_key, line.id, "imported", IMPORT_ACTOR, now_ms, {})
        for attribute in attribute_keys(line.content):
            conn.execute(
                "INSERT INTO memory_attributes (scope_key, attribute, memory_rowid) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (scope_key, attribute, rowid),
            )
        expires_at_ms = new.expires_at_ms
        live = (
            deleted_at_ms is None and line.superseded_by is None and (expires_at_ms is None or expires_at_ms > now_ms)
        )
        if generation is not None and live:
            rows.enqueue(conn, scope_key, rows.EMBED, rowid, now_ms)
            report.embed_jobs += 1
    report.people = import_people(conn, persons, now_ms, max_people)
    if report.embed_jobs:
        job_rows.notify(conn)
    return report


def import_people(conn: Conn, lines: Iterable[PersonLine], now_ms: int, max_people: int | None = None) -> PeopleReport:
    """The SQLite import's rules (``sqlite.admin.transfer_people.import_people``): a new person
    past ``max_people`` for its owner is refused and listed in ``report.refused``."""
    report = PeopleReport()
    by_name: dict[str, dict[str, StoredPerson]] = {}
    have: dict[str, int] = {}
    for line in lines:
        if conn.execute("SELECT 1 FROM people WHERE id = %s", (line.id,)).fetchone() is not None:
            report.already_present += 1
            continue
        named = by_name.get(line.owner)
        if named is None:
            named = by_name[line.owner] = {}
            owned = people.people_of(conn, line.owner)
            have[line.owner] = len(owned)
            for person in owned:
                named.setdefault(normalise_name(person.name), person)
        known = named.get(normalise_name(line.name))
        if known is None and max_people is not None and have[line.owner] >= max_people:
            report.refused.append(line.id)
            continue
        if known is None:
            have[line.owner] += 1
            person = StoredPerson(0, line.id, line.owner, line.name, list(line.aliases), line.relationship,
                                  ms_from_iso(line.created_at), ms_from_iso(line.updated_at))  # fmt: skip
            people.insert(conn, person)
            named.setdefault(normalise_name(line.name), person)
            rowid = person.rowid
            report.imported += 1
        else:
            for alias in line.aliases:
                known.add_alias(alias)
            known.relationship = known.relationship or line.relationship
            people.save(conn, known, now_ms)
            rowid = known.rowid
            report.merged += 1
        conn.execute(
            "INSERT INTO memory_people (scope_key, person_rowid, memory_rowid) SELECT %s, %s, rowid FROM memories "
            "WHERE id = ANY(%s) ON CONFLICT DO NOTHING",
            (PERSONAL_PREFIX + line.owner, rowid, list(line.memories)),
        )
    return report


def _evict_locked(conn: Conn, scope_key: str, limit: int, now_ms: int, protect_since_ms: int) -> int:
    from memoryd.store.postgres.store import lock_scope

    lock_scope(conn, scope_key)
    return eviction.evict_batch(conn, scope_key, limit, now_ms, protect_since_ms)


class Maintenance:
    """``interfaces.Maintenance`` on PostgreSQL."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._db: Database = store.db
        self._clock = store.clock

    def mark_expired(self) -> int:
        now, total = self._clock(), 0
        while (marked := self._db.run_sync(mark_expired_batch, now)) > 0:
            total += marked
            if marked < BATCH:
                break
        return total

    def gc(self, *, retention_ms: int, dry_run: bool = False) -> GcReport:
        started = time.perf_counter()
        now = self._clock()
        report = GcReport(dry_run=dry_run, cutoff_ms=now - retention_ms)
        if dry_run:
            report.purged_by_reason = self._db.run_sync(purge_counts, report.cutoff_ms)
            report.events_pruned = self._db.run_sync(count_prunable_events, report.cutoff_ms)
        else:
            while True:
                batch = self._db.run_sync(purge_batch, report.cutoff_ms, now)
                report.purged_by_reason.update(batch)
                if batch.total() < BATCH:
                    break
            report.events_pruned = self._db.run_sync(prune_events, report.cutoff_ms)
            self._db.run_sync(fold_counts)
        report.seconds = time.perf_counter() - started
        return report

    def enforce_max_entries(
        self, *, per_user: int, per_chat: int, protect_recent_ms: int, dry_run: bool = False
    ) -> EvictionReport:
        report = EvictionReport()
        if not dry_run:
            self.set_caps(per_user=per_user, per_chat=per_chat, protect_recent_ms=protect_recent_ms)
        if not per_user and not per_chat:
            return report
        now = self._clock()
        for scope_key, count, limit in self._db.run_sync(eviction.over_limit, per_user, per_chat):
            report.scopes[scope_key] = (count, limit)
            while not dry_run and (
                evicted := self._db.run_sync(_evict_locked, scope_key, limit, now, now - protect_recent_ms)
            ):
                report.evicted += evicted
        return report

    def set_caps(self, *, per_user: int, per_chat: int, protect_recent_ms: int) -> None:
        self._db.run_sync(eviction.store_caps, per_user, per_chat, protect_recent_ms)

    def erase_user(
        self,
        user_id: str,
        *,
        actor: str,
        include_group: bool = False,
        usernames: Sequence[str] = (),
        dry_run: bool = False,
    ) -> dict[str, int]:
        counts: dict[str, int] = self._store.erase_user(
            user_id, actor=actor, include_group=include_group, usernames=usernames, dry_run=dry_run
        )
        return counts

    def maintain(self, *, compact: bool = False, release_space: bool = False) -> MaintenanceReport:
        """PostgreSQL's autovacuum does the routine work; ``compact`` refreshes the planner's
        statistics of memoryd's tables, with ``release_space`` (`memoryd gc`) it vacuums them
        too (never VACUUM FULL, which would lock out every daemon).  ``release_space`` alone (a
        daemon stopping) does nothing: the server keeps its own log, and one daemon of several
        stopping is no reason to vacuum the database they share."""
        if not compact:
            return MaintenanceReport()
        statement = "VACUUM (ANALYZE)" if release_space else "ANALYZE"
        tables = (
            "memories",
            "memory_vectors",
            "jobs",
            "people",
            "memory_people",
            "observed_messages",
            "extraction_jobs",
        )
        try:
            with self._db.connect(autocommit=True) as conn:
                # A big table's VACUUM outlasts statement_timeout (meant for the calls); it holds
                # no lock a daemon waits for.
                conn.execute("SET statement_timeout = 0")
                for table in tables:
                    conn.execute(f"{statement} {table}")  # our own names
        except psycopg.OperationalError as exc:
            raise StoreUnreachable("postgres", type(exc).__name__) from None
        done = "vacuumed and analyzed" if release_space else "analyzed"
        return MaintenanceReport(compact_steps=len(tables) if compact else 0, done=f"{len(tables)} tables {done}")

    def record_maintenance(self, summary: dict[str, object]) -> None:
        value = msgspec.json.encode(summary).decode()
        self._db.run_sync(
            lambda conn: conn.execute(
                "INSERT INTO meta (key, value) VALUES ('maintenance_last', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (value,),
            )
        )

    async def flush_hits(self) -> int:
        entries = self._store.hits.drain()
        if entries:
            try:
                await self._db.run(rows.write_hits, entries)
            except BaseException:
                self._store.hits.restore(entries)
                raise
        return len(entries)

    def stats(self) -> dict[str, Any]:
        return self._db.run_sync(collect, self._clock())

    def check(self) -> list[Finding]:
        return self._db.run_sync(check, self._clock())

    def mark_damaged(self, detail: str) -> None:
        """A check outside the store found damage; PostgreSQL guards its own data, so this only
        records it in the log."""
        import logging

        logging.getLogger("memoryd.store").error("store: damage reported: %s", detail)

    def repair(self, findings: list[Finding]) -> list[str]:
        return self._db.run_sync(repair, findings, self._clock())

    def export(self, write: Callable[[bytes], object], *, user: str | None) -> int:
        def run(conn: Conn) -> int:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return export(conn, write, user, self._clock())

        return self._db.run_sync(run)

    def import_memories(
        self, lines: Iterable[MemoryLine | PersonLine], *, max_people: int | None = None
    ) -> ImportReport:
        return self._db.run_sync(import_lines, list(lines), self._clock(), max_people)
