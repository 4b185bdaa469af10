"""People on PostgreSQL: each owner's people, aliases, merges, and what a memory teaches about them."""

from memoryd.store.postgres.people.people import (
    announce,
    counts_about,
    create,
    delete,
    insert,
    link,
    lock_owner,
    memories_about,
    people_of,
    read_people,
    save,
    visible_people,
    visible_rowids,
)
from memoryd.store.postgres.people.people_learning import Learned, learn
from memoryd.store.postgres.people.people_repository import People, find

__all__ = [
    "Learned",
    "People",
    "announce",
    "counts_about",
    "create",
    "delete",
    "find",
    "insert",
    "learn",
    "link",
    "lock_owner",
    "memories_about",
    "people_of",
    "read_people",
    "save",
    "visible_people",
    "visible_rowids",
]
