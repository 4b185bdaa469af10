"""`memoryd check`: is the database sound, and do the FTS and vector indexes match the memories?

Invariants checked (the triggers and the job path maintain them; a bug, a crash of an older
version or a hand edit could break them):

* SQLite's ``integrity_check`` (which also runs FTS5's structural check of its segments);
* FTS holds exactly the live (not deleted) memories — compared through ``memories_fts_docsize``,
  which has one row per indexed document — and a random sample of live memories is found by
  a MATCH on its own words within its scope;
* the current vector table holds only live memories, with their scope and expiry; every
  memory marked as embedded in the current generation has its row; no tables of old
  generations are left; every live unexpired memory without a vector has an embed job;
* no job points at a missing or deleted memory.

``repair`` fixes the index problems in one write transaction: FTS is rebuilt from the live
rows, bad vector rows are dropped and their memories re-queued for embedding.  A failed
``integrity_check`` cannot be repaired in place: restore a backup.
"""

from __future__ import annotations

import apsw

from memoryd.store import query_terms
from memoryd.store.admin_records import Finding
from memoryd.store.sqlite.db.database import one
from memoryd.store.sqlite.jobs import jobs
from memoryd.store.sqlite.search import fts_query
from memoryd.store.sqlite.vectors import vector_codec, vectors
from memoryd.store.sqlite.vectors.vectors import NEVER, VectorSpace
from memoryd.store.sqlite.visibility_sql import live

RESTORE_HINT = "restore a backup: `memoryd backup` copies"

#: Live memories whose searchability is spot-checked.
FTS_SAMPLE = 200


def _ok(check: str, detail: str) -> Finding:
    return Finding(check, True, detail)


def check_sqlite(db: apsw.Connection) -> Finding:
    try:
        messages = [str(row[0]) for row in db.execute("PRAGMA integrity_check(20)")]
    except (apsw.CorruptError, apsw.NotADBError) as exc:
        # Damage bad enough that the check itself cannot walk the file: still a finding.
        messages = [f"integrity_check stopped: {exc}"]
    if messages == ["ok"]:
        return _ok("sqlite", "integrity_check ok")
    return Finding("sqlite", False, "; ".join(messages) + f" ({RESTORE_HINT})", len(messages))


def check_fts_documents(db: apsw.Connection) -> Finding:
    (missing,) = one(
        db,
        "SELECT count(*) FROM memories AS m WHERE m.deleted_at_ms IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM memories_fts_docsize AS d WHERE d.id = m.rowid)",
    )
    (extra,) = one(
        db,
        "SELECT count(*) FROM memories_fts_docsize AS d LEFT JOIN memories AS m ON m.rowid = d.id "
        "WHERE m.rowid IS NULL OR m.deleted_at_ms IS NOT NULL",
    )
    if missing == 0 and extra == 0:
        (indexed,) = one(db, "SELECT count(*) FROM memories WHERE deleted_at_ms IS NULL")
        return _ok("fts.documents", f"{indexed} live memories indexed, nothing else")
    return Finding(
        "fts.documents",
        False,
        f"{missing} live memories missing from the index, {extra} index entries of deleted or gone memories",
        int(missing + extra),
        repairable=True,
    )


def check_fts_sample(db: apsw.Connection, sample: int = FTS_SAMPLE) -> Finding:
    rows = db.execute(
        "SELECT rowid, content, subjects, scope_key FROM memories WHERE deleted_at_ms IS NULL "
        "ORDER BY random() LIMIT ?",
        (sample,),
    ).fetchall()
    lost = 0
    tried = 0
    for rowid, content, subjects, scope_key in rows:
        terms = query_terms.extract_terms(f"{content} {subjects}")[:4]
        if not terms:
            continue
        tried += 1
        expression = fts_query.match_expression([fts_query.scope_token(str(scope_key))], terms)
        found = db.execute(
            "SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? AND rowid = ?", (expression, rowid)
        ).fetchone()
        if found is None:
            lost += 1
    if lost == 0:
        return _ok("fts.search", f"{tried} sampled memories found by their own words")
    return Finding("fts.search", False, f"{lost} of {tried} sampled memories not found by their own words", lost, True)


def _vec_tables(db: apsw.Connection) -> list[str]:
    return [
        name
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'")
        if vectors.is_table_name(name)
    ]


def _bad_vector_rows_sql(space: VectorSpace) -> str:
    """Vector rows of memories that should have none, or whose vec0 row and ``vector_copies`` row
    disagree with the memory or with each other (both are read by searches: the vec0 row by
    sqlite-vec's scan, the copies by the in-memory scan and the rescoring)."""
    return (
        f"SELECT v.memory_rowid FROM {space.table} AS v LEFT JOIN memories AS m ON m.rowid = v.memory_rowid "
        "LEFT JOIN vector_copies AS c ON c.memory_rowid = v.memory_rowid "
        "WHERE m.rowid IS NULL OR m.deleted_at_ms IS NOT NULL OR m.superseded_by IS NOT NULL "
        "OR m.scope_key IS NOT v.scope_key "
        f"OR coalesce(m.expires_at_ms, {NEVER}) != v.expires_at OR m.vector_gen IS NOT ? "
        "OR m.disclosure != v.disclosure OR coalesce(m.chat_id, '') != v.learned_chat "
        "OR c.memory_rowid IS NULL OR c.coarse IS NOT v.coarse "
        # A rescoring copy is 6-bit, or int8 before m014 (vector_codec.py); nothing else can be read.
        f"OR length(c.fine) NOT IN {vector_codec.readable_lengths(space.dim)} "
        # Copies without a vec0 row (a search would never find them by the scan of a small scope).
        "UNION SELECT c.memory_rowid FROM vector_copies AS c "
        f"WHERE NOT EXISTS (SELECT 1 FROM {space.table} AS v WHERE v.memory_rowid = c.memory_rowid)"
    )


def _unbacked_sql(space: VectorSpace) -> str:
    """Memories claiming a vector they do not have (or one of another generation)."""
    return (
        "SELECT m.rowid FROM memories AS m WHERE m.deleted_at_ms IS NULL AND m.vector_gen IS NOT NULL "
        f"AND (m.vector_gen != ? OR NOT EXISTS (SELECT 1 FROM {space.table} AS v WHERE v.memory_rowid = m.rowid))"
    )


def check_vectors(db: apsw.Connection, now_ms: int) -> list[Finding]:
    space = vectors.read_space(db)
    tables = _vec_tables(db)
    if space is None:
        if tables:
            return [
                Finding("vectors.tables", False, f"vector tables without a vector space: {tables}", len(tables), True)
            ]
        return [_ok("vectors", "no vector space configured (keyword-only store)")]
    findings: list[Finding] = []
    stale = [name for name in tables if name != space.table]
    if space.table not in tables:
        findings.append(Finding("vectors.tables", False, f"table {space.table} is missing", 1, True))
        return findings
    findings.append(
        Finding("vectors.tables", False, f"tables of old generations left: {stale}", len(stale), True)
        if stale
        else _ok("vectors.tables", f"{space.table} ({space.model}, dim {space.dim})")
    )
    (bad,) = one(db, f"SELECT count(*) FROM ({_bad_vector_rows_sql(space)})", (space.generation,))
    (unbacked,) = one(db, f"SELECT count(*) FROM ({_unbacked_sql(space)})", (space.generation,))
    (rows,) = one(db, f"SELECT count(*) FROM {space.table}")
    if bad or unbacked:
        findings.append(
            Finding(
                "vectors.rows",
                False,
                f"{bad} vector rows of deleted/gone memories or with a wrong scope, expiry or disclosure; "
                f"{unbacked} memories marked embedded without their vector",
                int(bad + unbacked),
                True,
            )
        )
    else:
        findings.append(
            _ok("vectors.rows", f"{rows} vectors, all of live memories, scope, expiry and disclosure match")
        )
    live_sql, live_params = live("m", now_ms=now_ms)
    (unqueued,) = one(
        db,
        f"SELECT count(*) FROM memories AS m WHERE {live_sql} AND m.vector_gen IS NOT ? "
        "AND NOT EXISTS (SELECT 1 FROM jobs AS j WHERE j.memory_rowid = m.rowid AND j.kind = ?)",
        (*live_params, space.generation, jobs.EMBED),
    )
    findings.append(
        Finding(
            "vectors.queue", False, f"{unqueued} live memories have no vector and no embed job", int(unqueued), True
        )
        if unqueued
        else _ok("vectors.queue", "every live memory without a vector has an embed job")
    )
    return findings


def check_jobs(db: apsw.Connection) -> Finding:
    (orphans,) = one(
        db,
        "SELECT count(*) FROM jobs AS j LEFT JOIN memories AS m ON m.rowid = j.memory_rowid "
        "WHERE m.rowid IS NULL OR m.deleted_at_ms IS NOT NULL",
    )
    if orphans:
        return Finding("jobs", False, f"{orphans} jobs of deleted or gone memories", int(orphans), True)
    return _ok("jobs", "every job belongs to a live memory")


def check(db: apsw.Connection, now_ms: int, *, fts_sample: int = FTS_SAMPLE) -> list[Finding]:
    """Every check, in one read snapshot."""
    sqlite = check_sqlite(db)
    if not sqlite.ok:
        return [sqlite]  # the other checks would read a damaged file
    return [
        sqlite,
        check_fts_documents(db),
        check_fts_sample(db, fts_sample),
        *check_vectors(db, now_ms),
        check_jobs(db),
    ]


def repair(db: apsw.Connection, findings: list[Finding], now_ms: int) -> list[str]:
    """Fix what ``check`` found (run in one write transaction); returns what was done."""
    failed = {finding.check for finding in findings if not finding.ok and finding.repairable}
    done: list[str] = []
    if failed & {"fts.documents", "fts.search"}:
        done.append(f"rebuilt the FTS index from {rebuild_fts(db)} live memories")
    if any(name.startswith("vectors") for name in failed):
        done.extend(repair_vectors(db, now_ms))
    if "jobs" in failed:
        db.execute(
            "DELETE FROM jobs WHERE memory_rowid NOT IN (SELECT rowid FROM memories WHERE deleted_at_ms IS NULL)"
        )
        done.append(f"dropped {db.changes()} jobs of deleted or gone memories")
    return done


def rebuild_fts(db: apsw.Connection) -> int:
    # FTS5's own 'rebuild' would index every row of the content table, deleted ones too.
    db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
    db.execute(
        "INSERT INTO memories_fts (rowid, content, subjects, scope_token) "
        "SELECT rowid, content, subjects, scope_token FROM memories WHERE deleted_at_ms IS NULL"
    )
    return int(db.changes())


def repair_vectors(db: apsw.Connection, now_ms: int) -> list[str]:
    done: list[str] = []
    space = vectors.read_space(db)
    for name in _vec_tables(db):
        if space is None or name != space.table:
            db.execute(f"DROP TABLE {name}")
            done.append(f"dropped stale vector table {name}")
    if space is None:
        return done
    vectors.create_table(db, space)
    bad = [row[0] for row in db.execute(_bad_vector_rows_sql(space), (space.generation,))]
    vectors.delete_vectors(db, space, bad)
    unbacked = [row[0] for row in db.execute(_unbacked_sql(space), (space.generation,))]
    db.executemany("UPDATE memories SET vector_gen = NULL WHERE rowid = ?", [(rowid,) for rowid in {*bad, *unbacked}])
    if bad or unbacked:
        done.append(f"dropped {len(bad)} bad vector rows; {len(set(bad) | set(unbacked))} memories to re-embed")
    queued = jobs.enqueue_missing(db, space, now_ms)
    if queued:
        done.append(f"queued {queued} embed jobs (the daemon's backfill embeds them)")
    return done
