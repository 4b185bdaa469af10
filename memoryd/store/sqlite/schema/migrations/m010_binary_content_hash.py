"""Schema step 010: the dedupe hash as 16 bytes of BLOB instead of 32 hex characters."""

from __future__ import annotations

import hashlib
import unicodedata

import apsw


def content_hash(content: str) -> bytes:
    """The dedupe digest as this step computes it: the first 16 bytes of the SHA-256 of the
    NFC-normalised, whitespace-collapsed content."""
    canonical = " ".join(unicodedata.normalize("NFC", content).split())
    return hashlib.sha256(canonical.encode("utf-8")).digest()[:16]


def m010_binary_content_hash(db: apsw.Connection) -> None:
    """``memories.content_hash`` holds the 128-bit digest as a BLOB:
    16 bytes instead of 33 in the row and again in ``memories_dedupe``, ~32 bytes per memory.
    Every row's hash is computed again from its content (a hash written by hand, or by an old
    import, would not convert), then the index is rebuilt, so its pages are packed."""
    db.create_scalar_function("memoryd_content_hash", content_hash, 1, deterministic=True)
    try:
        db.execute("UPDATE memories SET content_hash = memoryd_content_hash(content)")
    finally:
        db.create_scalar_function("memoryd_content_hash", None)
    db.execute("REINDEX memories_dedupe")
