"""The client libraries' people, context and summary methods against a real daemon."""

from __future__ import annotations

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd_client import AsyncMemoryClient, MemoryClient, NotFound


async def test_async_client_people_context_summary(daemon: Daemon) -> None:
    async with AsyncMemoryClient(str(daemon.config.socket_path), user_id="alice") as client:
        await client.add("My wife's name is Sarah")
        food = (await client.add("Sarah likes Italian food"))["id"]
        await client.add("Bobby likes chess", subjects=["Bobby"])
        await client.add("Robert is my brother")
        assert (await client.search("what does my wife like?"))[0]["id"] == food
        assert [m["id"] for m in await client.list(about="Sarah") if "food" in m["content"]] == [food]
        about_wife = await client.search("food", about="my wife")
        assert about_wife[0]["id"] == food and {h["about"][0] for h in about_wife} == {"Sarah"}
        assert {p["name"] for p in await client.people()} == {"Sarah", "Bobby", "Robert"}
        assert (await client.person("wife"))["name"] == "Sarah"
        assert "Bobby" in (await client.merge_people("Bobby", "Robert"))["aliases"]
        assert "Rob" in (await client.add_alias("Robert", "Rob"))["aliases"]
        context = await client.context("dinner ideas for my wife?", limit=3, max_chars=500)
        assert context["people"][0]["name"] == "Sarah" and len(context["text"]) <= 500
        assert (await client.summary())["source"] == "digest"
        assert (await client.forget_person("Robert"))["archived_count"] == 2
        with pytest.raises(NotFound):
            await client.person("Robert")


async def test_blocking_client_people_context_summary(daemon: Daemon) -> None:
    def scenario() -> None:
        with MemoryClient(str(daemon.config.socket_path), user_id="alice") as client:
            client.add("Tom is my boss")
            client.add("Tom likes golf", subjects=["Tom"])
            assert client.search("what does my boss like?")[0]["about"] == ["Tom"]
            assert [m["about"] for m in client.list(about="my boss")] == [["Tom"], ["Tom"]]
            assert client.people()[0]["relationship"] == "boss"
            assert len(client.person("Tom", limit=1)["memories"]) == 1
            client.add("Tommy plays golf", subjects=["Tommy"])
            assert "Tommy" in client.merge_people("Tommy", "my boss")["aliases"]
            assert "Thomas" in client.add_alias("Tom", "Thomas")["aliases"]
            assert client.context("ask my boss", max_chars=300)["people"][0]["name"] == "Tom"
            assert "Tom (boss)" in client.summary()["summary"]
            result = client.forget_person("Thomas", delete_person_record=False)
            assert result["person_deleted"] is False and len(result["deleted"]) == 3
            assert client.people()[0]["memories"] == 0

    await trio.to_thread.run_sync(scenario)
