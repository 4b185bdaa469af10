"""How a unit vector is stored: one sign bit per dimension for the scan, int8 for the rescoring.

At a million memories the vector table is most of the file, so each copy is as small as the
ranking allows:

* the *coarse* copy (``dim / 8`` bytes) is what vec0 scans: hamming distance over sign bits;
* the *fine* copy (``dim`` bytes) rescores the scan's shortlist: each component scaled by
  127 / (its largest magnitude) and rounded.  The cosine is ``q . u / |q|``, so no scale is
  stored.  Against float32 its error is below 0.004 for MiniLM-like vectors (384-d); float16,
  the format before schema m008, took twice the space (768 bytes) for an error the ranking
  cannot see either way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

#: The largest magnitude of an int8 component (symmetric: -127..127, never -128).
_INT8_MAX = 127.0


def coarse_bits(dim: int) -> int:
    """Bits of the coarse copy: ``dim`` rounded up to whole bytes."""
    return -(-dim // 8) * 8


def coarse(vector: FloatArray) -> bytes:
    """The sign bits of ``vector``, packed (vec0's ``BIT[n]`` layout)."""
    return np.packbits(vector > 0).tobytes()


def fine(vector: FloatArray) -> bytes:
    """The int8 copy of a unit vector (``dim`` bytes)."""
    return _quantize(vector.reshape(1, -1)).tobytes()


def fine_from_float16(blobs: list[bytes], dim: int) -> list[bytes]:
    """Stored float16 copies (before m008) re-encoded as int8 copies."""
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(len(blobs), dim).astype(np.float32)
    return [row.tobytes() for row in _quantize(matrix)]


def unit_from_fine(blob: bytes) -> FloatArray:
    """The unit vector an int8 copy stands for (to search with a stored memory's vector)."""
    vector = np.frombuffer(blob, dtype=np.int8).astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector  # type: ignore[no-any-return]


def cosines(blobs: list[bytes], query: FloatArray, dim: int) -> npt.NDArray[np.float32]:
    """Cosine of the unit ``query`` with each stored int8 copy."""
    matrix = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dim).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0.0] = 1.0
    return (matrix @ query) / norms  # type: ignore[no-any-return]


def _quantize(matrix: FloatArray) -> npt.NDArray[np.int8]:
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    peaks[peaks == 0.0] = 1.0
    return np.rint(matrix * (_INT8_MAX / peaks)).astype(np.int8)  # type: ignore[no-any-return]
