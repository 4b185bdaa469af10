"""One owner's people, indexed for finding their mentions in a text and for resolving a phrase
("my wife", "Sarah") to one of them."""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.knowledge import Mention, MentionFinder, PersonIndex
from memoryd.store import StoredPerson


class Directory:
    """One owner's people, indexed for mentions and for resolution; rebuilt after any change to
    them.  Each index is built when first needed: an owner whose people change with every add
    (a flood of new names) would otherwise pay for both, on the event loop, per add."""

    def __init__(self, persons: Sequence[StoredPerson]) -> None:
        self.by_id = {person.id: person for person in persons}
        self._finder: MentionFinder | None = None
        self._index: PersonIndex | None = None

    @property
    def finder(self) -> MentionFinder | None:
        if self._finder is None and self.by_id:
            self._finder = MentionFinder([person.known() for person in self.by_id.values()])
        return self._finder

    @property
    def index(self) -> PersonIndex:
        if self._index is None:
            self._index = PersonIndex([person.known() for person in self.by_id.values()])
        return self._index

    def mentioned(self, text: str) -> list[StoredPerson]:
        return [person for person, _ in self.mentions(text)]

    def mentions(self, text: str) -> list[tuple[StoredPerson, Mention]]:
        if self.finder is None:
            return []
        return [(self.by_id[m.person.key], m) for m in self.finder.find(text) if m.person is not None]
