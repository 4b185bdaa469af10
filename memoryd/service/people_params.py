"""Params of the person.*, memory.forget_person, memory.context and memory.summary methods."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from memoryd.service.params import CallerParams, Relevance, SubjectName

#: What memory.context answers by default: a system prompt's worth.
DEFAULT_CONTEXT_CHARS = 2000


class PersonListParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    pass


class PersonGetParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    #: A name, an alias, a relationship ("my wife") or a person id.
    name: SubjectName
    limit: Annotated[int, Meta(ge=1, le=1000)] = 50


class PersonMergeParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    from_: SubjectName = msgspec.field(name="from")
    into: SubjectName


class PersonAliasParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    name: SubjectName
    alias: SubjectName


class ForgetPersonParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    """``person`` (memoryd) or ``person_id`` (ash's name for it): one is required."""

    person: SubjectName | None = None
    person_id: SubjectName | None = None
    #: ash's flag; memoryd deletes the person record unless it is false.
    delete_person_record: bool = True


class ContextParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    message: str
    limit: Annotated[int, Meta(ge=1, le=50)] = 5
    max_chars: Annotated[int, Meta(ge=100, le=100_000)] = DEFAULT_CONTEXT_CHARS
    #: No memory is injected unless the best reaches this relevance (relevance.for_context); None:
    #: the config's [context] min_relevance.
    min_relevance: Relevance | None = None
    #: Whether ``summary`` and the block's "About the user:" part are filled; None: the config's
    #: [context] include_summary.
    include_summary: bool | None = None


class SummaryParams(CallerParams, kw_only=True, forbid_unknown_fields=True):
    pass
