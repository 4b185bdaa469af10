"""The person.* methods and memory.forget_person: list, get, merge, alias and forget the
caller's people, as far as the caller's scope may know of them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memoryd.auth import Authenticator
from memoryd.errors import InvalidParams, NotFound
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd.secrets import scan
from memoryd.service.params import MAX_SUBJECT_BYTES
from memoryd.service.people_params import (
    ForgetPersonParams,
    PersonAliasParams,
    PersonGetParams,
    PersonListParams,
    PersonMergeParams,
)
from memoryd.service.provenance import caller_scope
from memoryd.service.validation import check_text
from memoryd.store import AliasTaken, PeopleStore, Scope, StoredPerson

log = logging.getLogger("memoryd.service")


class PersonMethods:
    """The methods on the wire; ``PeopleService`` holds the store, the caches and the listeners
    they use."""

    people: PeopleStore
    authenticator: Authenticator
    #: Told when a person's memories or names changed (summary freshness).
    on_changed: list[Callable[[Scope], None]]
    #: Drops the owner's cached directory (``PeopleService.forget_directory``).
    forget_directory: Callable[[str], None]

    async def list(self, params: PersonListParams, ctx: CallContext) -> list[dict[str, Any]]:
        scope = caller_scope(params, ctx, self.authenticator)
        persons = await self.people.visible_people(scope)
        counts = await self.people.counts(scope, persons)
        return [{**person.wire(), "memories": counts[person.id]} for person in persons]

    async def get(self, params: PersonGetParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        person = await self._find(scope, "name", params.name)
        memories = await self.people.memories_about(scope, person, limit=params.limit)
        return {**person.wire(), "memories": memories}

    async def merge(self, params: PersonMergeParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        outcome = await self.people.merge(scope, params.from_, params.into)
        if outcome.source is None:
            raise _no_person("from")
        if outcome.target is None:
            raise _no_person("into")
        if outcome.merged is None:
            raise InvalidParams.for_field("into", "names the same person as from")
        self._changed(scope)
        log.info("person.merged", extra=fields(id=outcome.merged.id))
        return outcome.merged.wire()

    async def alias(self, params: PersonAliasParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        check_text("alias", params.alias, max_bytes=MAX_SUBJECT_BYTES)
        if not scan(params.alias).clean:
            raise InvalidParams.for_field("alias", "looks like it holds a secret; memoryd does not store credentials")
        try:
            person = await self.people.add_alias(scope, params.name, params.alias)
        except AliasTaken:
            raise InvalidParams.for_field("alias", "already names another person (use person.merge)") from None
        if person is None:
            raise _no_person("name")
        self._changed(scope)
        return person.wire()

    async def forget(self, params: ForgetPersonParams, ctx: CallContext) -> dict[str, Any]:
        scope = caller_scope(params, ctx, self.authenticator)
        field, phrase = ("person", params.person) if params.person is not None else ("person_id", params.person_id)
        if phrase is None:
            raise InvalidParams.for_field("person", "is required (a name, alias, relationship or person id)")
        forgotten = await self.people.forget(scope, phrase, delete_person=params.delete_person_record)
        if forgotten is None:
            raise _no_person(field)
        self._changed(scope)
        log.info("person.forgotten", extra=fields(id=forgotten.person.id, memories=len(forgotten.memory_ids)))
        return {
            "person": forgotten.person.wire(),
            "person_deleted": forgotten.person_deleted,
            "deleted": forgotten.memory_ids,
            "archived_count": len(forgotten.memory_ids),  # ash's name for the count
        }

    async def _find(self, scope: Scope, field: str, phrase: str) -> StoredPerson:
        person = await self.people.find(scope, phrase)
        if person is None:
            raise _no_person(field)
        return person

    def _changed(self, scope: Scope) -> None:
        self.forget_directory(scope.user_id)
        for listener in self.on_changed:
            listener(scope)


def _no_person(field: str) -> NotFound:
    return NotFound(
        "None of your people has that name, alias or relationship",
        {"field": field, "reason": "names none of your people"},
    )
