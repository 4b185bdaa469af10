"""People: learned on every add, found in queries, and the person.* / forget_person methods
(those are in ``people_methods.py``; one owner's indexed people in ``people_directory.py``).

Every person is the caller's own (``Scope.user_id``); what a caller sees of the memories about
them is what ``store/visibility.py`` lets it see, in the caller's current chat.  A person is
known to a caller only through such a memory (``store.people.visible_people``): one learned
only in a private chat, or from a sensitive memory, does not exist for a group chat — not in
person.list or person.get, not as a mention in a query or in memory.context, not as a name
the person.* methods accept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memoryd.auth import Authenticator
from memoryd.errors import PeopleLimitReached
from memoryd.knowledge import KnownPerson, Mention, Resolver, normalise_name
from memoryd.knowledge.people import MAX_HIDDEN_PICKS, SELF_WORDS, new_subjects
from memoryd.service.erasure_watch import ErasureWatch
from memoryd.service.params import MAX_SUBJECT_BYTES
from memoryd.service.people_directory import Directory
from memoryd.service.people_methods import PersonMethods
from memoryd.service.validation import check_text
from memoryd.store import MemoryRecord, PeopleFocus, PeopleStore, Scope, StoredPerson
from memoryd.store.erasure_log import Erased

#: Owners whose people are indexed for mentions at once (the rest are re-read when asked).
FINDER_CACHE_OWNERS = 1024


class PeopleService(PersonMethods):
    """What the other services use of people (learning them on add, the room for new ones, the
    mentions and focus of a query, the supersession resolver), with per-owner caches; and the
    person.* methods (``PersonMethods``)."""

    def __init__(self, people: PeopleStore, authenticator: Authenticator, *, max_people: int | None = None) -> None:
        self.people = people
        #: limits.max_people_per_owner (None: unbounded).
        self.max_people = max_people
        self.authenticator = authenticator
        self._directories: dict[str, Directory] = {}
        #: owner -> how many people they have, as the last add that learned them said.
        self._counts: dict[str, int] = {}
        #: Told when a person's memories or names changed (summary freshness).
        self.on_changed: list[Callable[[Scope], None]] = []
        #: Erasures by other processes, checked before a cached directory decides a refusal.
        self.erasure_watch: ErasureWatch | None = None

    async def learn(self, scope: Scope, record: MemoryRecord, owner_names: tuple[str, ...]) -> None:
        """An added memory's people, in a write of their own (an ``AddedListener``: extraction's
        facts; ``memory.add`` learns them in its own transaction with ``owner_names``)."""
        learned = await self.people.learn(
            scope.user_id,
            record.id,
            record.content,
            record.subjects,
            owner_names,
            max_people=self.max_people,
            seen_by=scope,
        )
        self.learned(scope, changed=learned.changed)

    async def check_room(self, scope: Scope, subjects: Sequence[str], owner_names: Sequence[str]) -> None:
        """Refuse, before any write, an add whose subjects would create people past
        ``max_people`` for an owner already at it (a flood of new names then costs a look-up,
        not a write transaction).  The store checks again, exactly, inside the transaction; a
        subject counts as new here as it does there: when it names nobody ``scope`` may know of."""
        limit = self.max_people
        if limit is None or not subjects:
            return
        count = self._counts.get(scope.user_id)
        if count is not None and count + len(subjects) <= limit:
            return  # far from the bound: no need to look at the people themselves
        if self.erasure_watch is not None:
            await self.erasure_watch.check()  # an erased owner's old people must not count
        directory = await self._directory(scope.user_id)
        have = len(directory.by_id)
        if have + len(subjects) <= limit:
            return
        own = {normalise_name(name) for name in owner_names if name} | SELF_WORDS
        resolved = await self._resolve_visible(scope, directory, subjects)
        new = new_subjects(resolved.get, own, subjects)
        if have + len(new) > limit:
            raise PeopleLimitReached(f"subjects[{new[max(limit - have, 0)]}]", limit)

    async def _resolve_visible(
        self, scope: Scope, directory: Directory, phrases: Sequence[str]
    ) -> dict[str, KnownPerson]:
        """phrase -> the person it names among those ``scope`` may know of: the store's rule
        (``people_learning``: when the person a phrase picks is hidden, another may answer, up
        to MAX_HIDDEN_PICKS of them), with one visibility query per round for all phrases."""
        by_id, index = directory.by_id, directory.index
        hidden: dict[str, set[str]] = {phrase: set() for phrase in phrases}
        visible: dict[str, bool] = {}
        resolved: dict[str, KnownPerson] = {}
        pending = list(hidden)
        for _ in range(MAX_HIDDEN_PICKS):
            picks = {phrase: index.resolve(phrase, hidden[phrase]) for phrase in pending}
            unknown = {p.key for p in picks.values() if p is not None and p.key not in visible}
            if unknown:
                seen = await self.people.visible_rowids(scope, [by_id[key].rowid for key in unknown])
                visible.update({key: by_id[key].rowid in seen for key in unknown})
            pending = []
            for phrase, person in picks.items():
                if person is None:
                    continue
                if visible[person.key]:
                    resolved[phrase] = person
                else:
                    hidden[phrase].add(person.key)
                    pending.append(phrase)
            if not pending:
                break
        return resolved

    def learned(self, scope: Scope, *, changed: bool, count: int | None = None) -> None:
        """People were learned from a memory of ``scope``; ``changed``: some were created or
        renamed; ``count``: how many the owner has now, when the store said."""
        if changed:
            self.forget_directory(scope.user_id)
        if count is not None:
            if len(self._counts) >= FINDER_CACHE_OWNERS:
                self._counts.pop(next(iter(self._counts)))
            self._counts[scope.user_id] = count

    async def mentioned(self, scope: Scope, text: str) -> list[StoredPerson]:
        """The caller's people ``text`` mentions, by name, alias or relationship, that ``scope``
        may know of."""
        return [person for person, _ in await self._visible_mentions(scope, text)]

    async def _visible_mentions(self, scope: Scope, text: str) -> list[tuple[StoredPerson, Mention]]:
        # The directory indexes all of the owner's people (cached per owner); the ones the
        # scope may not know of are dropped by one query, before anything is said about them.
        mentions = (await self._directory(scope.user_id)).mentions(text)
        if not mentions:
            return []
        visible = await self.people.visible_rowids(scope, [person.rowid for person, _ in mentions])
        if len(visible) == len({person.rowid for person, _ in mentions}):
            return mentions
        # A hidden person took a phrase ("my wife") that one the scope knows may also answer:
        # find the mentions again among the people the scope knows.
        return Directory(await self.people.visible_people(scope)).mentions(text)

    async def focus(self, scope: Scope, query: str, about: str | None) -> tuple[PeopleFocus | None, str]:
        """What a search knows of people: who the query mentions, and the ``about`` filter
        (a phrase that names nobody filters everything out); and the query with each
        relationship phrase replaced by the name ("what does my wife like?" -> "what does Sarah
        like?"), which BM25 and the embedding find her memories by."""
        mentions = await self._visible_mentions(scope, query)
        only: tuple[int, ...] | None = None
        if about is not None:
            check_text("about", about, max_bytes=MAX_SUBJECT_BYTES)
            person = await self.people.find(scope, about)
            only = () if person is None else (person.rowid,)
        if not mentions and only is None:
            return None, query
        rewritten, rest = query, query
        for person, mention in sorted(mentions, key=lambda pm: -pm[1].start):  # right to left
            at = query.rfind(mention.text, 0, mention.start + len(mention.text))
            if at < 0:
                continue
            end = at + len(mention.text)
            rest = rest[:at] + " " + rest[end:]
            if mention.via == "relationship":
                rewritten = rewritten[:at] + person.name + rewritten[end:]
        return PeopleFocus(mentioned=tuple(p.rowid for p, _ in mentions), only=only, rest=rest), rewritten

    async def resolver_for(self, scope: Scope) -> Resolver:
        """The people ``scope`` may know of, for the supersession rules: "my wife" and "Sarah"
        are one subject."""
        directory = await self._directory(scope.user_id)
        persons = list(directory.by_id.values())
        visible = await self.people.visible_rowids(scope, [person.rowid for person in persons]) if persons else set()
        hidden = frozenset(person.id for person in persons if person.rowid not in visible)

        def resolve(phrase: str) -> str | None:
            # The owner's cached index, answering as if the hidden people were not there
            # (person_resolver's answers over the visible people, without its owner names).
            person = directory.index.resolve(phrase, hidden)
            return person.key if person else None

        return resolve

    def forget_directory(self, owner: str) -> None:
        self._directories.pop(owner, None)

    def forget_erased(self, erased: Erased) -> None:
        """Users were erased by another process (``ErasureWatch``): their directories and
        people counts go."""
        for owner in [owner for owner in self._directories if erased(owner)]:
            del self._directories[owner]
        for owner in [owner for owner in self._counts if erased(owner)]:
            del self._counts[owner]

    async def _directory(self, owner: str) -> Directory:
        directory = self._directories.get(owner)
        if directory is None:
            directory = Directory(await self.people.people_of(owner))
            if len(self._directories) >= FINDER_CACHE_OWNERS:
                self._directories.pop(next(iter(self._directories)))
            self._directories[owner] = directory
        return directory
