"""Extraction survives kill -9: a `memoryd serve` child is killed while the fake LLM holds its
reply; after a restart the job runs again and its facts are stored exactly once.  The same for
a supersession the LLM decides."""

from __future__ import annotations

import signal
import time
from typing import Any

from tests.fake_llm import Answer, FakeLlm
from tests.wire import sync_call

ALICE = {"user_id": "alice", "chat_id": "chat-1"}
FACT = {"content": "Alice is allergic to peanuts.", "memory_type": "identity", "confidence": 0.99}


def wait_until(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def result(socket: Any, method: str, params: dict[str, Any]) -> Any:
    reply = sync_call(socket, method, params)
    assert "error" not in reply, reply
    return reply["result"]


def test_kill_9_mid_extraction_then_restart_completes_the_job_once(daemon_process: Any, fake: FakeLlm) -> None:
    env = {
        "MEMORYD_LLM_PROVIDER": "openai",
        "MEMORYD_LLM_URL": fake.url,
        "MEMORYD_LLM_MODEL": "fake-model",
        "MEMORYD_LLM_RETRIES": "0",
        "MEMORYD_EXTRACTION_DEBOUNCE_SECONDS": "0.1",
    }
    fake.script.append(Answer({"facts": [FACT]}, delay=60))  # held until the test ends
    fake.default = Answer({"facts": [FACT]})
    first = daemon_process(env=env).start()
    messages = [{"role": "user", "content": "I am allergic to peanuts.", "id": "m1"}]
    assert result(first.socket, "memory.observe", {**ALICE, "messages": messages}) == {"accepted": 1}
    wait_until(lambda: len(fake.seen) == 1)
    first.stop(signal.SIGKILL)

    second = daemon_process(env=env).start()
    wait_until(lambda: result(second.socket, "memory.list", ALICE) != [])
    time.sleep(0.5)  # time enough for a second (wrong) extraction to show
    listed = result(second.socket, "memory.list", ALICE)
    assert [m["content"] for m in listed] == ["Alice is allergic to peanuts."]
    assert len(fake.seen) == 2 and fake.seen[0].prompt_without_clock == fake.seen[1].prompt_without_clock
    extraction = result(second.socket, "system.health", {})["extraction"]
    assert extraction["pending_sessions"] == 0 and extraction["sessions_extracted_since_start"] == 1
    second.stop()


def test_kill_9_while_the_llm_decides_a_supersession_then_restart_decides_it(
    daemon_process: Any, fake: FakeLlm
) -> None:
    env = {
        "MEMORYD_LLM_PROVIDER": "openai",
        "MEMORYD_LLM_URL": fake.url,
        "MEMORYD_LLM_MODEL": "fake-model",
        "MEMORYD_LLM_RETRIES": "0",
    }
    fake.script.append(Answer({"decision": "conflict", "reason": "held"}, delay=60))  # held until the test ends
    fake.default = Answer({"decision": "conflict", "reason": "a new favourite"})
    first = daemon_process(env=env).start()
    red = result(first.socket, "memory.add", {**ALICE, "content": "My favorite color is red"})
    blue = result(first.socket, "memory.add", {**ALICE, "content": "My favorite color is blue"})
    wait_until(lambda: len(fake.seen) == 1)
    first.stop(signal.SIGKILL)

    second = daemon_process(env=env).start()
    history = {**ALICE, "memory_id": blue["id"]}
    wait_until(lambda: len(result(second.socket, "memory.history", history)) == 2)
    chain = result(second.socket, "memory.history", history)
    assert [m["id"] for m in chain] == [red["id"], blue["id"]]
    assert chain[0]["supersede_reason"] == "a new favourite"
    assert [m["id"] for m in result(second.socket, "memory.list", ALICE)] == [blue["id"]]
    second.stop()
