"""The erasure log a daemon reads to learn whom another process erased (SQLite's ``meta``
value): only the users erased since its last check, everyone when it cannot know."""

from __future__ import annotations

import pytest

from memoryd.service.erasure_watch import ErasureWatch
from memoryd.store import NewMemory, erasure_log
from memoryd.store.erasure_log import KEEP, Erased, ErasureLog
from memoryd.store.sqlite import Store
from tests.store_helpers import note, sql

USERS = ["alice", "bob", "carol", "dave"]


def whom(erased: Erased) -> list[str]:
    return [user for user in USERS if erased(user)]


def logged(*users: str, value: str | None = None) -> tuple[str | None, ErasureLog]:
    for user in users:
        value = erasure_log.append(value, user)
    log = erasure_log.read(value)
    assert log is not None
    return value, log


def test_a_reader_learns_the_users_erased_after_its_mark() -> None:
    value, log = logged("alice", "carol")
    assert whom(log.erased_since(None)) == ["alice", "carol"]  # it saw no log: every erasure is new
    first = log.entries[0][0]
    assert whom(log.erased_since(first)) == ["carol"]
    assert whom(log.erased_since(log.last)) == []
    _, later = logged("bob", value=value)
    assert whom(later.erased_since(log.last)) == ["bob"]
    assert later.salt == log.salt and later.entries[:2] == log.entries


def test_the_log_keeps_its_newest_entries_and_a_reader_too_far_behind_drops_everyone() -> None:
    value, log = logged("alice")
    mark = log.last
    _, full = logged(*["bob"] * KEEP, value=value)
    assert len(full.entries) == KEEP
    assert whom(full.erased_since(mark)) == USERS  # alice's entry is gone: whom it missed is unknown
    assert whom(full.erased_since(None)) == USERS  # entries may have been dropped from the front
    assert whom(full.erased_since(full.entries[0][0])) == ["bob"]
    assert whom(full.erased_since(12345)) == USERS  # a mark the log never held (a restored file)


def test_the_log_names_nobody_in_clear() -> None:
    value, log = logged("alice-the-user")
    assert value is not None and "alice" not in value
    _, other = logged("alice-the-user")
    assert other.salt != log.salt and other.entries[0][1] != log.entries[0][1]  # salted per log


@pytest.mark.parametrize("value", ["12345", "{not json", '{"salt": 3}', '{"salt": "s", "entries": [[1]]}'])
def test_an_unreadable_log_drops_everyone_once_and_the_next_erasure_starts_a_new_one(value: str) -> None:
    log = erasure_log.read(value)
    assert log is not None
    assert whom(log.erased_since(None)) == USERS and whom(log.erased_since(7)) == USERS
    _, fresh = logged("bob", value=value)
    assert len(fresh.entries) == 1 and fresh.salt
    assert whom(fresh.erased_since(log.last)) == USERS  # the reader's mark is not in the new log


def test_the_log_says_whether_an_erasure_since_a_mark_deleted_group_memories() -> None:
    value, log = logged("alice")
    plain = log.last
    value = erasure_log.append(value, "bob", group=True)
    grouped = erasure_log.read(value)
    assert grouped is not None and grouped.group == (grouped.last,)
    assert grouped.group_erased_since(plain) and grouped.group_erased_since(None)
    assert not grouped.group_erased_since(grouped.last)
    assert not log.group_erased_since(None)  # only erasures that kept the group memories
    # A reader too far behind, or an unreadable log, cannot tell: group memories may have gone.
    assert grouped.group_erased_since(12345)
    unreadable = erasure_log.read("{not json")
    assert unreadable is not None and unreadable.group_erased_since(None)
    # The flags of the entries dropped from the front go with them.
    _, full = logged(*["carol"] * KEEP, value=value)
    assert full.group == () and not full.group_erased_since(full.entries[0][0])


class Recorder:
    def __init__(self, store: Store) -> None:
        self.watch = ErasureWatch(store.people)
        self.heard: list[list[str]] = []
        self.watch.on_erased.append(lambda erased: self.heard.append(whom(erased)))
        self.watch.on_group_erased.append(lambda: self.heard.append(["group memories"]))

    async def check(self) -> list[list[str]]:
        self.heard.clear()
        await self.watch.check()
        return list(self.heard)


async def test_a_daemon_beside_the_erasures_drops_only_the_erased_users(store: Store) -> None:
    await store.memories.add(note("likes green tea"))
    daemon = Recorder(store)
    assert await daemon.check() == []  # no erasure yet: nothing to drop
    store.maintenance.erase_user("alice", actor="operator")
    store.maintenance.erase_user("carol", actor="operator")  # two between two checks
    assert await daemon.check() == [["alice", "carol"]]
    assert await daemon.check() == []
    store.maintenance.erase_user("dave", actor="operator", dry_run=True)
    assert await daemon.check() == []  # counting erases nothing
    store.maintenance.erase_user("bob", actor="operator")
    assert await daemon.check() == [["bob"]]

    restarted = Recorder(store)  # its caches may have been filled before its first check
    assert await restarted.check() == [USERS, ["group memories"]]
    assert await restarted.check() == []
    for _ in range(KEEP + 1):
        store.maintenance.erase_user("dave", actor="operator")
    assert await daemon.check() == [USERS, ["group memories"]]  # its mark fell out of the log
    assert await restarted.check() == [USERS, ["group memories"]]
    assert (
        len(erasure_log.read(sql(store.path, "SELECT value FROM meta WHERE key = 'erasure_log'")[0][0]).entries) == KEEP
    )


async def test_an_erasure_that_deletes_group_memories_tells_the_daemon_so(store: Store) -> None:
    await store.memories.add(NewMemory(content="standup at 9", owner="alice", chat_id="team", shared=True, source="t"))
    await store.memories.add(
        NewMemory(content="lunch on fridays", owner="bob", chat_id="team", shared=True, source="t")
    )
    daemon = Recorder(store)
    assert await daemon.check() == []
    store.maintenance.erase_user("alice", actor="operator")  # her group memory stays, anonymised
    assert await daemon.check() == [["alice"]]
    store.maintenance.erase_user("bob", actor="operator", include_group=True, dry_run=True)
    assert await daemon.check() == []
    store.maintenance.erase_user("carol", actor="operator", include_group=True)  # she had none
    assert await daemon.check() == [["carol"]]
    store.maintenance.erase_user("bob", actor="operator", include_group=True)
    assert await daemon.check() == [["bob"], ["group memories"]]
    assert await daemon.check() == []
