"""What the schema steps need to know about the stored vectors, frozen as the steps wrote them.

The steps copy these constants and encodings rather than import the live modules
(``vectors.py``, ``vector_codec.py``): an edit to today's code must never change what an old
step does to an old store.  Nothing outside ``migrations/`` imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw
import numpy as np
import numpy.typing as npt

#: vec0 rows per chunk, as every step that created a vec0 table used it.
CHUNK_SIZE = 512
#: A vec0 metadata column cannot hold NULL: "never expires".
NEVER = (1 << 63) - 1
#: Symmetric quantization bounds: int8 copies (m008-m012) and 6-bit copies (m012 on).
INT8_MAX = 127.0
SIX_BIT_MAX = 31


@dataclass(frozen=True, slots=True)
class Space:
    """The store's vector space as the ``meta`` table records it."""

    dim: int
    generation: int

    @property
    def table(self) -> str:
        return f"vec_g{int(self.generation)}"


def read_space(db: apsw.Connection) -> Space | None:
    found = dict(
        db.execute("SELECT key, value FROM meta WHERE key IN ('vector_model', 'vector_dim', 'vector_generation')")
    )
    if found.get("vector_model") is None:
        return None
    return Space(int(found.get("vector_dim") or 0), int(found.get("vector_generation") or 0))


def coarse_bits(dim: int) -> int:
    """Sign bits per vector: ``dim`` rounded up to whole bytes."""
    return -(-dim // 8) * 8


def fine_length(dim: int) -> int:
    """Bytes of a 6-bit copy: ``dim`` padded to whole groups of four components, three bytes each."""
    return 3 * -(-dim // 4)


def quantize(matrix: npt.NDArray[np.float32], largest: float) -> npt.NDArray[np.int8]:
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    peaks[peaks == 0.0] = 1.0
    return np.rint(matrix * (largest / peaks)).astype(np.int8)  # type: ignore[no-any-return]


def int8_from_float16(blobs: list[bytes], dim: int) -> list[bytes]:
    """float16 copies (before m008) as int8 copies (m008's format)."""
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(blobs), dim).astype(np.float32)
    return [row.tobytes() for row in quantize(matrix, INT8_MAX)]


def six_bit_from_int8(blobs: list[bytes], dim: int) -> list[bytes]:
    """int8 copies (m008-m012) as 6-bit copies: each component scaled by 31 / its largest
    magnitude, offset by 31 and packed four to three bytes (``dim`` 3 keeps int8: a 6-bit copy
    would be as long, and the length is what tells the formats apart)."""
    matrix = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dim).astype(np.float32)
    count = len(blobs)
    if fine_length(dim) == dim:
        return [row.tobytes() for row in quantize(matrix, INT8_MAX)]
    groups = -(-dim // 4)
    levels = np.full((count, 4 * groups), SIX_BIT_MAX, dtype=np.uint32)  # padding: component 0
    levels[:, :dim] = quantize(matrix, SIX_BIT_MAX).astype(np.int32) + SIX_BIT_MAX
    quads = levels.reshape(count, groups, 4)
    word = (quads[..., 0] << 18) | (quads[..., 1] << 12) | (quads[..., 2] << 6) | quads[..., 3]
    packed = np.stack([word >> 16, word >> 8, word], axis=-1).astype(np.uint8)
    return [row.tobytes() for row in packed.reshape(count, 3 * groups)]
