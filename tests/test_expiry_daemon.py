"""Expiry read from the words, through the socket: memory.add and the extractor's facts."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import trio

from tests.fake_llm import Answer, FakeLlm
from tests.test_extraction_daemon import ALICE, llm_config, start
from tests.wire import NdjsonPeer, call_ok


def moment(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


async def test_add_reads_a_duration_from_the_content(peer: NdjsonPeer) -> None:
    before = datetime.now(ZoneInfo("UTC"))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "Remember for 2 weeks: my parking spot is B12"})
    assert added["expires_at"] is not None
    delta = moment(added["expires_at"]) - before
    assert timedelta(days=14) - timedelta(seconds=5) < delta < timedelta(days=14, seconds=60)


async def test_add_leaves_a_past_duration_without_expiry(peer: NdjsonPeer) -> None:
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "I worked there for 2 weeks"})
    assert added["expires_at"] is None


async def test_expires_days_wins_over_the_words(peer: NdjsonPeer) -> None:
    before = datetime.now(ZoneInfo("UTC"))
    added = await call_ok(peer, "memory.add", {**ALICE, "content": "Closed for 2 weeks", "expires_days": 1})
    assert moment(added["expires_at"]) - before < timedelta(days=1, seconds=60)


async def test_add_ends_until_tomorrow_at_the_callers_midnight(peer: NdjsonPeer) -> None:
    tz = ZoneInfo("Pacific/Auckland")
    added = await call_ok(
        peer,
        "memory.add",
        {**ALICE, "content": "The lift is out of order until tomorrow", "timezone": "Pacific/Auckland"},
    )
    local = moment(added["expires_at"]).astimezone(tz)
    assert (local.hour, local.minute) == (0, 0)
    assert local.date() == (datetime.now(tz) + timedelta(days=2)).date()


async def test_an_extracted_fact_without_expires_days_gets_one_from_its_words(
    short_tmp: Path, nursery: trio.Nursery, fake: FakeLlm
) -> None:
    fake.default = Answer(
        {
            "facts": [
                {
                    "content": "Alice's gate code is 4411 for the next 3 days.",
                    "memory_type": "context",
                    "confidence": 0.9,
                },
                {"content": "Alice worked in Oslo for 2 weeks.", "memory_type": "knowledge", "confidence": 0.9},
            ]
        }
    )
    _, peer = await start(nursery, llm_config(short_tmp, fake))
    messages = [{"role": "user", "content": "The gate code is 4411 for the next 3 days. I worked in Oslo for 2 weeks."}]
    reply = await call_ok(peer, "memory.extract_from_messages", {**ALICE, "messages": messages})
    assert reply["stored"] == 2
    stored = {
        m["content"]: m for m in [await call_ok(peer, "memory.get", {**ALICE, "memory_id": i}) for i in reply["ids"]]
    }
    code = stored["Alice's gate code is 4411 for the next 3 days."]
    assert code["expires_at"] is not None
    assert timedelta(days=2, hours=23) < moment(code["expires_at"]) - datetime.now(ZoneInfo("UTC")) <= timedelta(days=3)
    assert stored["Alice worked in Oslo for 2 weeks."]["expires_at"] is None
    fake.stopping.set()
