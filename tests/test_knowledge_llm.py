"""decide_with_llm through the real LLM clients, against the loopback fake LLM server."""

from __future__ import annotations

import trio

from memoryd.knowledge.conflict import CONFLICT_SYSTEM_PROMPT, Statement, decide_with_llm
from memoryd.llm import LlmClient
from tests.fake_llm import Answer, FakeLlm, Raw

OLD = Statement("My car is a Honda Civic", created_at="2025-01-02T10:00:00Z")
NEW = Statement("I now drive a Tesla", created_at="2026-03-04T10:00:00Z")


async def decide(llm: LlmClient, old: Statement = OLD, new: Statement = NEW):
    with trio.fail_after(15):
        try:
            return await decide_with_llm(old, new, llm.complete_json)
        finally:
            await llm.aclose()


async def test_the_model_decides_a_pair_the_rules_cannot(fake: FakeLlm, llm: LlmClient) -> None:
    fake.script.append(Answer({"decision": "conflict", "reason": "the Tesla replaced the Civic"}))
    decision = await decide(llm)
    assert decision.supersedes and decision.decided_by == "llm"
    assert decision.reason == "the Tesla replaced the Civic"
    [seen] = fake.seen
    assert seen.system == CONFLICT_SYSTEM_PROMPT
    for needle in ("Honda Civic", "Tesla", "2025-01-02T10:00:00Z", "2026-03-04T10:00:00Z"):
        assert needle in seen.prompt
    assert seen.mode == "json_schema"


async def test_a_model_that_keeps_answering_garbage_falls_back_to_the_rules(fake: FakeLlm, llm: LlmClient) -> None:
    fake.default = Answer({"decision": "maybe"})
    decision = await decide(llm, Statement("I work at Acme"), Statement("I work at Globex"))
    assert decision.supersedes and decision.decided_by == "rules"
    assert "LLM failed" in decision.reason


async def test_a_model_that_is_down_falls_back_to_the_rules(fake: FakeLlm, llm: LlmClient) -> None:
    fake.default = Raw(503, b'{"error": "overloaded"}')
    decision = await decide(llm, Statement("I like cats"), Statement("I like dogs"))
    assert decision.verdict == "coexist" and decision.decided_by == "rules"
