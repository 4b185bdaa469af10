"""Which users were erased, for daemons that learn of erasures by reading the store.

`memoryd forget-user` run beside a running daemon erases the user from the store, but the
daemon's caches (summaries per scope, people per owner) were built before.  An engine that
cannot tell the daemons itself (SQLite: PostgreSQL sends NOTIFY ``erased:<user>``) appends each
erasure to this small log in the erasure's own transaction; a daemon remembers the mark of the
last entry it read and, before it answers from a cache, drops the caches of the users erased
since.  Only those users': the others' caches stay.

The log keeps the newest KEEP entries.  A daemon that has never read it (just started) or whose
mark is no longer in it (more than KEEP erasures since, a restored file) cannot know whom it
missed, and drops every cache: the safe answer, rebuilt from the store on next use.

An entry holds a salted digest of the user id, not the id: the erasure removes every other
record of the user, and the daemon only needs to recognise the users it has cached.  Marks are
random, like the people generation: a rolled-back erasure's mark never comes back.

An entry also says whether the erasure deleted group memories (``--include-group``): other
members' cached summaries of a group chat were built from them, so a daemon then drops every
cached summary of a group chat (the log names no chat; erasures are rare and a summary is
rebuilt from the store on next use).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import msgspec

#: Erasures the log remembers: a daemon further behind drops every cache once.
KEEP = 64
#: The mark of a log that could not be read (it stands for an erasure of unknown users).
UNREADABLE = -1

#: Whether a user was erased (and their caches must go).
Erased = Callable[[str], bool]
#: The PostgreSQL notice (on ``memoryd_changes``) of an erasure that deleted group memories.
GROUP_ERASED = "erased-group"
#: The prefix of the PostgreSQL notice that memories under a scope key were deleted or evicted
#: (``deleted:<key>``): a cached summary may quote them, so it goes, where an add (the bare key)
#: only leaves it stale.
DELETED = "deleted:"
_random = random.SystemRandom()


def everyone(user_id: str) -> bool:
    """Every user: what a daemon drops when it cannot know whom an erasure was about."""
    return True


class ErasureLog(msgspec.Struct, frozen=True):
    #: Random, chosen with the log's first entry: the digests mean nothing without it.
    salt: str
    #: (mark, digest of the user id), oldest first.
    entries: tuple[tuple[int, str], ...] = ()
    #: The marks of the entries whose erasure deleted group memories.
    group: tuple[int, ...] = ()

    @property
    def last(self) -> int | None:
        """The newest entry's mark (None: no erasure yet)."""
        return self.entries[-1][0] if self.entries else None

    def digest(self, user_id: str) -> str:
        return hashlib.sha256(f"{self.salt}\0{user_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def appended(self, user_id: str, *, group: bool = False) -> ErasureLog:
        """This log with ``user_id``'s erasure as its newest entry (the oldest beyond KEEP
        dropped); ``group``: the erasure deleted group memories."""
        mark = _random.getrandbits(62)
        entries = (*self.entries, (mark, self.digest(user_id)))[-KEEP:]
        kept = {entry[0] for entry in entries}
        return ErasureLog(self.salt, entries, tuple(m for m in (*self.group, *([mark] if group else [])) if m in kept))

    def erased_since(self, mark: int | None) -> Erased:
        """The users erased after the entry ``mark`` (None: after none, the reader saw no log);
        everyone when the log no longer reaches back that far or cannot be read."""
        start = self._start(mark)
        if start is None:
            return everyone
        digests = frozenset(digest for _, digest in self.entries[start:])
        if not digests:
            return lambda user_id: False
        return lambda user_id: self.digest(user_id) in digests

    def group_erased_since(self, mark: int | None) -> bool:
        """Whether an erasure after the entry ``mark`` deleted group memories (True when the log
        cannot tell: no longer reaching back that far, or unreadable)."""
        start = self._start(mark)
        if start is None:
            return True
        return any(entry[0] in self.group for entry in self.entries[start:])

    def _start(self, mark: int | None) -> int | None:
        """The index of the first entry after ``mark``; None when the log cannot tell."""
        marks = [entry[0] for entry in self.entries]
        if UNREADABLE in marks:
            return None
        if mark is None and len(marks) < KEEP:
            return 0  # nothing was dropped from the front: these are all the erasures there were
        if mark is not None and mark in marks:
            return marks.index(mark) + 1
        return None


def erased_after(log: ErasureLog | None, mark: int | None, user_id: str) -> bool:
    """Whether ``user_id`` was erased after the entry ``mark`` of the log (None: there was no
    log then); when the log cannot tell (more than KEEP erasures since, unreadable), yes."""
    if log is None or log.last == mark:
        return False
    return log.erased_since(mark)(user_id)


def read(value: str | None) -> ErasureLog | None:
    """The stored log (None: no erasure yet).  One that cannot be decoded reads as one erasure
    of unknown users: a daemon drops every cache once, and the next erasure starts a new log."""
    if value is None:
        return None
    try:
        return msgspec.json.decode(value, type=ErasureLog)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return ErasureLog(salt="", entries=((UNREADABLE, ""),))


def append(value: str | None, user_id: str, *, group: bool = False) -> str:
    """The stored log ``value`` with ``user_id``'s erasure appended, to be stored in its place
    (``group``: the erasure deleted group memories)."""
    log = read(value)
    if log is None or log.last == UNREADABLE:
        log = ErasureLog(salt=f"{_random.getrandbits(128):032x}")
    return msgspec.json.encode(log.appended(user_id, group=group)).decode()
