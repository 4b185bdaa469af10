"""ash's disclosure rules, the same in every retriever (list, get, delete, keyword, vector), on every backend.

The rules, as the table in docs/protocol.md states them (written here on their own, not imported):
a sensitive memory only in a private chat; a conversation-private memory, or any memory under
``this_chat``, only in the chat where it was learned; in a group chat, a memory learned
elsewhere only if it was learned in a group.  A caller of unknown chat type gets no group rule,
unless its identity is verified (token) and names a chat: then it counts as a group.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import trio

from memoryd.store import NewMemory, Provenance, QueryVector, Scope
from memoryd.store.interfaces import Backend
from tests.contract.conftest import BACKENDS
from tests.contract.helpers import DIM, embed_all, note, unit
from tests.store_helpers import Clock

HERE, ELSEWHERE = "chat-here", "chat-elsewhere"
LEARNED_TYPES = (None, "private", "group", "supergroup", "channel")
SENSITIVITIES = (None, "public", "personal", "sensitive")


@dataclass(frozen=True)
class Learned:
    chat_id: str | None
    chat_type: str | None
    sensitivity: str | None
    conversation_private: bool
    shared: bool = False

    @property
    def content(self) -> str:
        return f"tea {self.chat_id} {self.chat_type} {self.sensitivity} {self.conversation_private} {self.shared}"


def expected(memory: Learned, caller: Scope) -> bool:
    if memory.shared and memory.chat_id != caller.chat_id:
        return False  # visibility itself: a group memory belongs to its chat
    group_audience = caller.chat_type not in (None, "private") or (
        caller.chat_type is None and caller.verified and caller.chat_id is not None
    )
    learned_here = caller.chat_id is not None and memory.chat_id == caller.chat_id
    if memory.sensitivity == "sensitive" and caller.chat_type != "private":
        return False
    if (caller.this_chat or memory.conversation_private) and not learned_here:
        return False
    return not group_audience or learned_here or memory.chat_type in ("group", "supergroup")


PERSONAL = [
    Learned(chat, kind, sensitivity, private)
    for chat, kind, sensitivity, private in itertools.product(
        (None, HERE, ELSEWHERE), LEARNED_TYPES, SENSITIVITIES, (False, True)
    )
]
GROUP = [
    Learned(HERE, kind, sensitivity, private, shared=True)
    for kind, sensitivity, private in itertools.product(LEARNED_TYPES, SENSITIVITIES, (False, True))
]
CALLERS = [
    Scope("alice", chat, kind, this_chat, verified)
    for chat, kind, this_chat, verified in itertools.product(
        (HERE, None), (None, "private", "group", "supergroup", "channel"), (False, True), (False, True)
    )
]


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def learned_everywhere(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Backend, dict[str, Learned]]]:
    store = BACKENDS[request.param](tmp_path_factory.mktemp("disclosure"), Clock())
    store.configure_vector_space("contract:test", DIM)

    def new(memory: Learned) -> NewMemory:
        owner = "bob" if memory.shared else "alice"
        provenance = Provenance(
            chat_type=memory.chat_type,
            sensitivity=memory.sensitivity,
            conversation_private=memory.conversation_private,
        )
        return note(memory.content, owner, chat_id=memory.chat_id, shared=memory.shared, provenance=provenance)

    store.memories.add_many(new(memory) for memory in PERSONAL + GROUP)
    trio.run(embed_all, store, lambda content: unit(1))
    by_content = {memory.content: memory for memory in PERSONAL + GROUP}
    yield store, by_content
    store.close()


@pytest.mark.parametrize("caller", CALLERS, ids=repr)
async def test_every_retriever_applies_the_disclosure_rules(
    learned_everywhere: tuple[Backend, dict[str, Learned]], caller: Scope
) -> None:
    store, by_content = learned_everywhere
    want = {content for content, memory in by_content.items() if expected(memory, caller)}
    everything = len(by_content)
    listed = {r.content for r in await store.memories.list(caller, limit=1000)}
    keyword = {h.content for h in await store.memories.search(caller, "tea", limit=everything)}
    vector = {
        h.content
        for h in await store.memories.search(caller, "", limit=everything, vector=QueryVector.at_hand(unit(1)))
    }
    assert listed == keyword == vector == want
    for record in await store.memories.list(Scope("alice", HERE, "private"), limit=1000):
        got = await store.memories.get(caller, record.id)
        assert (got is not None) == (record.content in want), record.content


async def test_a_hidden_memory_cannot_be_deleted_from_where_it_is_hidden(backend: Backend) -> None:
    dm, _ = await backend.memories.add(note("my diagnosis", chat_id="dm", provenance=Provenance(chat_type="private")))
    in_group = Scope("alice", "team", "group")
    assert await backend.memories.get(in_group, dm.id) is None
    assert await backend.memories.delete(in_group, dm.id[:8]) is None
    assert await backend.memories.delete(Scope("alice", "dm", "private"), dm.id[:8]) == dm.id


CROWD = 3000


async def test_the_vector_scan_filters_inside_the_knn_so_hidden_vectors_cannot_starve_results(backend: Backend) -> None:
    """Thousands of private-chat memories nearer to the query than the three the group may
    see: a global top-k filtered afterwards would return none of the three."""
    near, far = unit(1), unit(0, 0, 1)
    private = Provenance(chat_type="private")
    backend.memories.add_many(note(f"dm note {i}", chat_id="dm", provenance=private) for i in range(CROWD))
    visible = [f"group-learned note {i}" for i in range(3)]
    backend.memories.add_many(note(c, chat_id="other-team", provenance=Provenance(chat_type="group")) for c in visible)
    await embed_all(backend, lambda content: far if content in visible else near)
    hits = await backend.memories.search(
        Scope("alice", "team", "group"), "", limit=10, vector=QueryVector.at_hand(near)
    )
    assert {h.content for h in hits} == set(visible)
    # The same store in private: the crowd is back, nearest first.
    hits = await backend.memories.search(
        Scope("alice", "dm", "private"), "", limit=10, vector=QueryVector.at_hand(near)
    )
    assert len(hits) == 10 and all(h.content.startswith("dm note") for h in hits)


async def test_a_duplicate_hidden_from_the_adders_chat_is_neither_returned_nor_reused(backend: Backend) -> None:
    said_in_dm, _ = await backend.memories.add(
        note("I am moving to Berlin", chat_id="dm", provenance=Provenance(chat_type="private"))
    )
    in_group = note("I am moving to Berlin", chat_id="team", provenance=Provenance(chat_type="group"))
    said_in_group, deduplicated = await backend.memories.add(in_group)
    assert not deduplicated and said_in_group.id != said_in_dm.id
    assert [r.id for r in await backend.memories.list(Scope("alice", "team", "group"), limit=10)] == [said_in_group.id]
    again, deduplicated = await backend.memories.add(in_group)
    assert deduplicated and again.id == said_in_group.id
    # A sensitive restatement does not vanish into the public one either.
    sensitive = note(
        "I am moving to Berlin", chat_id="team", provenance=Provenance(chat_type="group", sensitivity="sensitive")
    )
    assert (await backend.memories.add(sensitive))[1] is False
