"""Store: schema m010 keeps the dedupe hash as 16 bytes; a store of schema 9 (hex text) upgrades
and still finds its old memories' duplicates."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memoryd.store import Scope
from memoryd.store.sqlite import Store
from memoryd.store.sqlite.memories import memories
from memoryd.store.sqlite.schema import ladder as schema
from tests.store_helpers import note, sql


def test_the_hash_is_16_bytes_and_ignores_whitespace() -> None:
    digest = memories.content_hash("tea  with\nmilk")
    assert isinstance(digest, bytes) and len(digest) == 16
    assert digest == memories.content_hash("tea with milk")


async def test_a_store_with_hex_hashes_upgrades_and_dedupes_its_old_memories(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Store(path) as store:
        old, _ = await store.memories.add(note("bob drinks oolong tea"))
        await store.memories.add(note("bob lives in lisbon", "bob"))
    # Back to schema 9: the hash as 32 hex characters, as m001-m009 wrote it.
    for rowid, content in sql(path, "SELECT rowid, content FROM memories"):
        hex_hash = hashlib.sha256(" ".join(content.split()).encode()).hexdigest()[:32]
        sql(path, "UPDATE memories SET content_hash = ? WHERE rowid = ?", (hex_hash, rowid))
    sql(path, "DROP TABLE vector_copies")  # schema 13's
    sql(path, f"PRAGMA user_version = {schema.version_before(schema.m010_binary_content_hash)}")
    assert {len(h) for (h,) in sql(path, "SELECT content_hash FROM memories")} == {32}

    with Store(path) as upgraded:
        assert sql(path, "PRAGMA user_version") == [(schema.LATEST,)]
        assert sql(path, "SELECT DISTINCT typeof(content_hash), length(content_hash) FROM memories") == [("blob", 16)]
        again, deduplicated = await upgraded.memories.add(note("bob  drinks oolong tea"))
        assert deduplicated and again.id == old.id
        assert len(await upgraded.memories.list(Scope("alice"), limit=10)) == 1
    assert sql(path, "PRAGMA integrity_check") == [("ok",)]
