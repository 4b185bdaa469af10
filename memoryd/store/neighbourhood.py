"""A memory's neighbourhood: the memories added just before and after it in the same scope, linked.

The ranking model reads a candidate's neighbours (``ranking.py``); each backend reads them its own
way (SQLite: ``sqlite/search/neighbours.py``) into this structure.  Neighbours only count as
linked when they were added within MAX_GAP_MS of each other: an exchange, not last week's note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

#: Memories added further apart than this are not each other's context.
MAX_GAP_MS = 30 * 60 * 1000


class Row(NamedTuple):
    """One memory of a neighbourhood (a tuple: a search builds a few hundred of them)."""

    rowid: int
    text: str  # content and subjects, for term matching
    created_at_ms: int


@dataclass
class Neighbourhood:
    """Rows around the candidates, with links to the previous and next row of each."""

    rows: dict[int, Row] = field(default_factory=dict)
    before: dict[int, int] = field(default_factory=dict)
    after: dict[int, int] = field(default_factory=dict)
    #: The rowids whose surroundings were read (the ``rowids`` of ``around``).
    centres: set[int] = field(default_factory=set)

    def merged(self, other: Neighbourhood) -> Neighbourhood:
        """Both neighbourhoods as one: what ``around`` gives for both lists of centres (each
        link is between two rows adjacent among those the caller sees, whichever centre's
        walk found it)."""
        return Neighbourhood(
            {**self.rows, **other.rows},
            {**self.before, **other.before},
            {**self.after, **other.after},
            self.centres | other.centres,
        )

    def link(self, first: Row, second: Row) -> None:
        if abs(second.created_at_ms - first.created_at_ms) <= MAX_GAP_MS:
            self.after[first.rowid] = second.rowid
            self.before[second.rowid] = first.rowid

    def walk(self, rowid: int, steps: int) -> int | None:
        """The row ``steps`` links away (negative: earlier), or None past a gap or the edge."""
        links = self.after if steps > 0 else self.before
        current: int | None = rowid
        for _ in range(abs(steps)):
            current = links.get(current) if current is not None else None
        return current
