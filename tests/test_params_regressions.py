"""Params the method-table fuzzer (tests/test_params_fuzz.py) found mishandled, each through a real socket."""

from __future__ import annotations

from tests.wire import NdjsonPeer, call_ok

ALICE = {"user_id": "alice"}


async def test_add_with_this_chat_and_no_chat_is_stored_and_deduplicated(peer: NdjsonPeer) -> None:
    # this_chat is a filter of search and list: an add ignores it (it once reached the
    # duplicate check as "no disclosure shows" and SQLite refused the query: -32603).
    first = await call_ok(peer, "memory.add", {**ALICE, "content": "tea at five", "this_chat": True})
    again = await call_ok(peer, "memory.add", {**ALICE, "content": "tea at five", "this_chat": True})
    assert (again["id"], again["deduplicated"]) == (first["id"], True)
    here = {**ALICE, "chat_id": "dm-al", "this_chat": True}
    in_chat = await call_ok(peer, "memory.add", {**here, "content": "tea at five"})
    assert not in_chat["deduplicated"]  # learned in another chat: a memory of its own
    hits = await call_ok(peer, "memory.search", {**ALICE, "query": "tea"})
    assert sorted(hit["id"] for hit in hits) == sorted([first["id"], in_chat["id"]])
