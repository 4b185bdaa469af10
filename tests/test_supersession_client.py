"""The client library's supersession methods (blocking and trio) against a real daemon."""

from __future__ import annotations

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import AsyncMemoryClient, MemoryClient
from memoryd_client.errors import NotFound


async def test_trio_client_add_supersedes_key_history_and_include_superseded(daemon: Daemon) -> None:
    async with AsyncMemoryClient(str(daemon.config.socket_path), user_id="alice") as client:
        red = await client.add("My favorite color is red")
        blue = await client.add("My favorite color is blue")
        assert blue["superseded"] == [red["id"]]
        assert [m["id"] for m in await client.history(blue["id"])] == [red["id"], blue["id"]]
        assert [h["id"] for h in await client.search("favorite color")] == [blue["id"]]
        hits = await client.search("favorite color", include_superseded=True)
        assert {h["id"] for h in hits} == {red["id"], blue["id"]}
        assert len(await client.list(include_superseded=True)) == 2 and len(await client.list()) == 1
        plan = await client.add("Standup at 10", key="standup")
        moved = await client.add("Standup at 11", key="standup")
        assert moved["superseded"] == [plan["id"]]
        note = await client.add("Gym on Tuesdays")
        again = await client.add("Gym on Thursdays", supersedes=note["short_id"])
        assert again["superseded"] == [note["id"]]


def blocking_calls(path: str) -> None:
    with MemoryClient(path, user_id="bob") as client:
        old = client.add("I work at Acme")
        new = client.add("I work at Globex")
        assert new["superseded"] == [old["id"]]
        assert [m["id"] for m in client.history(old["id"])] == [old["id"], new["id"]]
        assert [m["id"] for m in client.list(include_superseded=True)] == [new["id"], old["id"]]
        assert len(client.search("work", include_superseded=True)) == 2
        with pytest.raises(NotFound):
            client.history("01ARZ3NDEKTSV4RRFFQ69G5FAV")
        keyed = client.add("Drinks tea", key="drink", supersedes=None)
        assert client.add("Drinks coffee", key="drink")["superseded"] == [keyed["id"]]


async def test_blocking_client_add_supersedes_key_history_and_include_superseded(daemon: Daemon) -> None:
    await trio.to_thread.run_sync(blocking_calls, str(daemon.config.socket_path))
