"""How a unit vector is stored: one sign bit per dimension for the scan, 6 bits per dimension
for the rescoring.

At a million memories the vector table is most of the file, so each copy is as small as the
ranking allows:

* the *coarse* copy (``dim / 8`` bytes) is what the scans read: hamming distance over sign bits;
* the *fine* copy rescores the scan's shortlist: each component scaled by 31 / (its largest
  magnitude), rounded, and packed four to three bytes (288 bytes at 384-d).  The
  cosine is ``q . u / |q|``, so no scale is stored.  On MiniLM vectors its error is ~0.001 on
  average (int8's: 0.0003) and below 0.01; the ten best of a 64-row shortlist stay the same
  ones 98.9 % of the time (int8: 99.8 %).  float16 copies (768 bytes, before m008) and int8
  copies (``dim`` bytes, m008-m012) are the older formats, re-encoded by the schema steps
  (``migrations/vector_formats.py``); an int8 copy is still read (the length tells the two
  apart), and a space of dimension 3 keeps int8 (``fine_many``).

Both copies are kept in ``vector_copies`` (``vectors.py``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

#: The largest magnitude of an int8 component (symmetric: -127..127, never -128).
_INT8_MAX = 127.0
#: The largest magnitude of a 6-bit component (symmetric: -31..31, stored as 0..62).
_SIX_BIT_MAX = 31


def coarse_bits(dim: int) -> int:
    """Bits of the coarse copy: ``dim`` rounded up to whole bytes."""
    return -(-dim // 8) * 8


def coarse(vector: FloatArray) -> bytes:
    """The sign bits of ``vector``, packed (vec0's ``BIT[n]`` layout)."""
    return np.packbits(vector > 0).tobytes()


def fine_length(dim: int) -> int:
    """Bytes of a 6-bit copy: ``dim`` padded to whole groups of four components, three bytes each."""
    return 3 * -(-dim // 4)


def readable_lengths(dim: int) -> tuple[int, ...]:
    """The lengths a stored fine copy may have: 6-bit, or int8 (dimension 3)."""
    return (fine_length(dim), dim)


def fine(vector: FloatArray) -> bytes:
    """The stored rescoring copy of a unit vector (6 bits per component)."""
    return fine_many(vector.reshape(1, -1))[0]


def fine_many(matrix: FloatArray) -> list[bytes]:
    """``fine`` of each row of ``matrix``."""
    count, dim = matrix.shape
    if fine_length(dim) == dim:
        # dim 3 only: a 6-bit copy would be as long as the int8 one, so the length could not
        # tell them apart; such a space keeps int8 (no real model has 3 dimensions).
        return [row.tobytes() for row in _quantize(matrix, _INT8_MAX)]
    groups = -(-dim // 4)
    levels = np.full((count, 4 * groups), _SIX_BIT_MAX, dtype=np.uint32)  # padding: component 0
    levels[:, :dim] = _quantize(matrix, _SIX_BIT_MAX).astype(np.int32) + _SIX_BIT_MAX
    quads = levels.reshape(count, groups, 4)
    word = (quads[..., 0] << 18) | (quads[..., 1] << 12) | (quads[..., 2] << 6) | quads[..., 3]
    packed = np.stack([word >> 16, word >> 8, word], axis=-1).astype(np.uint8)
    return [row.tobytes() for row in packed.reshape(count, 3 * groups)]


def unit_from_fine(blob: bytes, dim: int) -> FloatArray:
    """The unit vector a fine copy stands for (to search with a stored memory's vector)."""
    vector = _components([blob], dim)[0]
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector  # type: ignore[no-any-return]


def cosines(blobs: list[bytes], query: FloatArray, dim: int) -> npt.NDArray[np.float32]:
    """Cosine of the unit ``query`` with each stored fine copy."""
    return cosines_of_each(blobs, [query], dim)[0]


def cosines_of_each(blobs: list[bytes], queries: list[FloatArray], dim: int) -> list[npt.NDArray[np.float32]]:
    """:func:`cosines` of each unit query in ``queries``, from one decoding of the copies."""
    matrix = _components(blobs, dim)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0.0] = 1.0
    return [(matrix @ query) / norms for query in queries]


def _components(blobs: list[bytes], dim: int) -> FloatArray:
    """The stored components of each copy (up to its own scale), one row per blob."""
    int8 = [i for i, blob in enumerate(blobs) if len(blob) == dim]
    if not int8:
        return _unpack_six_bit(blobs, dim)
    if len(int8) == len(blobs):
        return np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dim).astype(np.float32)
    # A store whose copies m012 left as int8 (another sqlite-vec layout) gets 6-bit ones beside them.
    matrix = np.empty((len(blobs), dim), dtype=np.float32)
    six_bit = [i for i, blob in enumerate(blobs) if len(blob) != dim]
    matrix[int8] = _components([blobs[i] for i in int8], dim)
    matrix[six_bit] = _unpack_six_bit([blobs[i] for i in six_bit], dim)
    return matrix


def _unpack_six_bit(blobs: list[bytes], dim: int) -> FloatArray:
    packed = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), -1, 3)
    first, second, third = packed[..., 0], packed[..., 1], packed[..., 2]
    levels = np.empty((len(blobs), packed.shape[1], 4), dtype=np.uint8)
    levels[..., 0] = first >> 2
    levels[..., 1] = ((first & 3) << 4) | (second >> 4)
    levels[..., 2] = ((second & 15) << 2) | (third >> 6)
    levels[..., 3] = third & 63
    matrix = levels.reshape(len(blobs), -1)[:, :dim].astype(np.float32)
    matrix -= _SIX_BIT_MAX
    return matrix


def _quantize(matrix: FloatArray, largest: float) -> npt.NDArray[np.int8]:
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    peaks[peaks == 0.0] = 1.0
    return np.rint(matrix * (largest / peaks)).astype(np.int8)  # type: ignore[no-any-return]
