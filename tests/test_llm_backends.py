"""OpenAI-compatible and Ollama chat backends against a real loopback server (tests/fake_llm.py)."""

from __future__ import annotations

import email.utils
import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import trio

from memoryd.config import LlmConfig
from memoryd.errors import ConfigError, LlmBadReply, LlmRefused, LlmUnavailable
from memoryd.http_backend import MAX_RETRY_AFTER, retry_after
from memoryd.llm import (
    LlmClient,
    OllamaChat,
    OpenAIChat,
    decode_reply,
    json_schema,
    make_llm,
)
from memoryd.llm.schema import BadReply
from tests.fake_llm import Answer, CutOff, FakeLlm, Raw, Seen

FAST: dict[str, Any] = {"timeout": 2.0, "backoff": 0.01, "max_backoff": 0.05}


class Pet(msgspec.Struct):
    name: str
    legs: int = 4


class Pets(msgspec.Struct):
    pets: list[Pet]
    note: str | None = None


GOOD = {"pets": [{"name": "Rex"}, {"name": "Tweety", "legs": 2}]}
EXPECTED = Pets([Pet("Rex"), Pet("Tweety", 2)])


@pytest.fixture(params=["openai", "ollama"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client(provider: str, url: str, **options: Any) -> LlmClient:
    backend = OpenAIChat if provider == "openai" else OllamaChat
    return backend(url, "test-model", **{**FAST, **options})


async def ask(llm: LlmClient, struct: type[Any] = Pets) -> Any:
    with trio.fail_after(15):
        try:
            return await llm.complete_json("You list pets.", [{"role": "user", "content": "I have Rex."}], struct)
        finally:
            await llm.aclose()


async def test_a_reply_decodes_into_the_struct_and_the_request_carries_the_schema(fake: FakeLlm, provider: str) -> None:
    fake.script.append(Answer(GOOD))
    assert await ask(client(provider, fake.url)) == EXPECTED
    [seen] = fake.seen
    assert seen.system == "You list pets."
    assert seen.prompt == "I have Rex."
    assert seen.body["model"] == "test-model" and seen.body["stream"] is False
    assert seen.mode == "json_schema"
    if provider == "openai":
        assert seen.path == "/v1/chat/completions"
        sent_schema = seen.body["response_format"]["json_schema"]["schema"]
        assert seen.body["temperature"] == 0.0
    else:
        assert seen.path == "/api/chat"
        sent_schema = seen.body["format"]
        assert seen.body["options"]["temperature"] == 0.0
    assert sent_schema == json_schema(Pets)
    assert sent_schema["type"] == "object" and "$ref" not in json.dumps(sent_schema)
    assert sent_schema["properties"]["pets"]["items"]["required"] == ["name"]


async def test_the_api_key_is_sent_and_never_shown(fake: FakeLlm) -> None:
    fake.script.append(Raw(401, b'{"error": {"message": "Incorrect API key provided: sk-secret-123"}}'))
    llm = OpenAIChat(fake.url + "/v1", "m", api_key="sk-secret-123", **FAST)
    with pytest.raises(LlmRefused, match="HTTP 401") as caught:
        await ask(llm)
    assert fake.seen[0].headers["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in str(caught.value)
    assert "sk-secret-123" not in json.dumps(llm.describe())
    assert len(fake.seen) == 1  # a 401 is not retried


GARBAGE = [
    pytest.param(Raw(200, b"<html>502 Bad Gateway</html>"), "not a chat", id="html"),
    pytest.param(Raw(200, b""), "not a chat", id="empty-body"),
    pytest.param(Raw(200, b'{"choices": [], "message": 1}'), "chat", id="wrong-envelope"),
    pytest.param(Answer(""), "empty reply", id="empty-content"),
    pytest.param(Answer("I'm sorry, I can't list pets."), "not JSON", id="prose"),
    pytest.param(Answer('{"pets": [{"name": "Rex"'), "not JSON", id="truncated"),
    pytest.param(Answer({"pets": [{"name": 7}]}), "Expected `str`, got `int`", id="wrong-type"),
    pytest.param(Answer({"pets": [{"legs": 2}]}), "missing required field `name`", id="missing-field"),
    pytest.param(Answer([{"name": "Rex"}]), "requested shape", id="a-list-not-an-object"),
    pytest.param(Answer(GOOD, finish_reason="length"), "cut off at max_tokens", id="cut-at-max-tokens"),
]


@pytest.mark.parametrize(("bad", "reason"), GARBAGE)
async def test_a_reply_that_does_not_decode_is_retried_then_raises_bad_reply(
    fake: FakeLlm, provider: str, bad: Answer | Raw, reason: str
) -> None:
    fake.script.extend([bad, bad, bad])
    with pytest.raises(LlmBadReply, match=re.escape(reason) + r".*\(after 3 attempts\)") as caught:
        await ask(client(provider, fake.url, retries=2))
    assert len(fake.seen) == 3
    assert "Rex" not in str(caught.value)  # the reason names the place, never the text


async def test_one_bad_reply_then_a_good_one_succeeds(fake: FakeLlm, provider: str) -> None:
    fake.script.extend([Answer("not json at all"), Answer(GOOD)])
    llm = client(provider, fake.url, retries=1)
    assert await ask(llm) == EXPECTED
    assert len(fake.seen) == 2
    assert llm.describe()["state"] == "closed"


WRAPPED = [
    pytest.param("```json\n" + json.dumps(GOOD) + "\n```", id="code-fence"),
    pytest.param("Here you go: " + json.dumps(GOOD) + " Anything else?", id="prose-around"),
    pytest.param(json.dumps({**GOOD, "extra": "ignored"}), id="unknown-field"),
]


@pytest.mark.parametrize("text", WRAPPED)
def test_common_wrappings_of_a_plain_reply_still_decode(text: str) -> None:
    assert decode_reply(text, Pets) == EXPECTED


def test_decode_reply_refuses_blank_and_prose() -> None:
    with pytest.raises(BadReply, match="empty reply"):
        decode_reply("```json\n\n```", Pets)
    with pytest.raises(BadReply, match="not JSON"):
        decode_reply("no braces here", Pets)


async def test_timeouts_are_retried_then_raise_unavailable(fake: FakeLlm, provider: str) -> None:
    fake.script.extend([Answer(GOOD, delay=5.0), Answer(GOOD, delay=5.0)])
    with pytest.raises(LlmUnavailable, match=r"no reply within 0\.2 s \(after 2 attempts\)"):
        await ask(client(provider, fake.url, retries=1, timeout=0.2))
    assert len(fake.seen) == 2


async def test_a_slow_reply_then_a_fast_one_succeeds(fake: FakeLlm, provider: str) -> None:
    fake.script.extend([Answer(GOOD, delay=5.0), Answer(GOOD)])
    assert await ask(client(provider, fake.url, retries=1, timeout=0.3)) == EXPECTED


async def test_a_server_dying_mid_reply_is_retried(fake: FakeLlm, provider: str) -> None:
    fake.script.extend([CutOff(), Answer(GOOD)])
    assert await ask(client(provider, fake.url, retries=1)) == EXPECTED
    assert len(fake.seen) == 2


async def test_a_server_dying_mid_reply_every_time_raises_unavailable(fake: FakeLlm, provider: str) -> None:
    fake.script.extend([CutOff(), CutOff()])
    with pytest.raises(LlmUnavailable, match=r"connection failed .*\(after 2 attempts\)"):
        await ask(client(provider, fake.url, retries=1))


async def test_a_down_server_raises_unavailable_after_the_retries() -> None:
    with socket.socket() as sock:  # bound then closed: connecting is refused at once
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    llm = OllamaChat(url, "m", retries=2, **FAST)
    with pytest.raises(LlmUnavailable, match=r"ConnectError.*\(after 3 attempts\)") as caught:
        await ask(llm)
    assert caught.value.retry_later is True
    assert llm.describe()["state"] == "closed" and "ConnectError" in str(llm.describe()["last_error"])


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_rate_limits_and_server_errors_are_retried(fake: FakeLlm, provider: str, status: int) -> None:
    fake.script.extend([Raw(status, b'{"error": "busy"}', {"Retry-After": "0"}), Answer(GOOD)])
    assert await ask(client(provider, fake.url, retries=1)) == EXPECTED
    assert len(fake.seen) == 2


async def test_retry_after_is_waited_for(fake: FakeLlm) -> None:
    fake.script.extend([Raw(429, b"{}", {"Retry-After": "0.3"}), Answer(GOOD)])
    llm = OpenAIChat(fake.url, "m", retries=1, timeout=2.0, backoff=0.001, max_backoff=1.0)
    started = trio.current_time()
    assert await ask(llm) == EXPECTED
    # The only wait is the server's hint; our own backoff is a millisecond.
    assert trio.current_time() - started >= 0.3


async def test_a_retry_after_longer_than_max_backoff_ends_the_call_with_the_hint(fake: FakeLlm) -> None:
    fake.script.extend([Raw(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "120"}), Answer(GOOD)])
    with pytest.raises(LlmUnavailable, match=r"HTTP 429: slow down \(after 1 attempt\)") as caught:
        await ask(OpenAIChat(fake.url, "m", retries=3, **FAST))
    assert caught.value.retry_after == 120.0
    assert len(fake.seen) == 1  # not hammered while it asked us to wait


async def test_persistent_server_errors_raise_unavailable(fake: FakeLlm, provider: str) -> None:
    fake.script.extend(Raw(503, b'{"error": "overloaded"}') for _ in range(3))
    with pytest.raises(LlmUnavailable, match=r"HTTP 503.*\(after 3 attempts\)"):
        await ask(client(provider, fake.url, retries=2))


def _response(value: str) -> httpx.Response:
    return httpx.Response(429, headers={"Retry-After": value})


def test_retry_after_reads_seconds_and_http_dates_and_caps_them() -> None:
    now = time.time()
    in_90s = email.utils.formatdate(now + 90, usegmt=True)
    assert retry_after(_response("7")) == 7.0
    assert retry_after(_response("1.5")) == 1.5
    assert retry_after(_response("-3")) == 0.0
    assert retry_after(_response("999999")) == MAX_RETRY_AFTER
    assert 88 <= (retry_after(_response(in_90s), now=now) or 0) <= 90
    assert retry_after(_response(email.utils.formatdate(now - 60, usegmt=True)), now=now) == 0.0
    assert retry_after(_response("soon")) is None
    assert retry_after(httpx.Response(429)) is None


async def test_a_server_rejecting_json_schema_gets_json_mode_and_it_is_remembered(fake: FakeLlm, provider: str) -> None:
    fake.reject_modes = {"json_schema"}
    fake.script.extend([Answer(GOOD), Answer(GOOD)])
    llm = client(provider, fake.url, retries=0)
    with trio.fail_after(10):
        assert await llm.complete_json("s", [{"role": "user", "content": "u"}], Pets) == EXPECTED
        assert await llm.complete_json("s", [{"role": "user", "content": "u"}], Pets) == EXPECTED
        await llm.aclose()
    json_mode = "json_object" if provider == "openai" else "json"
    # The 400 cost no attempt (retries=0), and the second call starts where the first ended.
    assert [seen.mode for seen in fake.seen] == ["json_schema", json_mode, json_mode]
    assert llm.describe()["output_mode"] == json_mode


async def test_a_server_rejecting_every_format_gets_a_plain_request(fake: FakeLlm, provider: str) -> None:
    fake.reject_modes = {"json_schema", "json_object", "json"}
    fake.script.append(Answer("```json\n" + json.dumps(GOOD) + "\n```"))
    assert await ask(client(provider, fake.url, retries=0)) == EXPECTED
    assert [seen.mode for seen in fake.seen][-1] == "plain"
    assert "response_format" not in fake.seen[-1].body and "format" not in fake.seen[-1].body


async def test_a_400_in_every_mode_is_refused_and_no_mode_is_remembered(fake: FakeLlm, provider: str) -> None:
    fake.default = Raw(400, b'{"error": {"message": "context length exceeded"}}')
    llm = client(provider, fake.url, retries=2)
    with pytest.raises(LlmRefused, match="HTTP 400: context length exceeded") as caught:
        await ask(llm)
    assert len(fake.seen) == 3  # one per mode, no retries: the request itself is refused
    assert caught.value.retry_later is False
    assert llm.describe()["output_mode"] == "json_schema"


async def test_an_openai_refusal_is_a_bad_reply(fake: FakeLlm) -> None:
    refusal = {"choices": [{"message": {"content": None, "refusal": "I can't help"}, "finish_reason": "stop"}]}
    fake.script.extend([Raw(200, json.dumps(refusal).encode())] * 2)
    with pytest.raises(LlmBadReply, match="refused"):
        await ask(OpenAIChat(fake.url, "m", retries=1, **FAST))


async def test_concurrency_is_capped(fake: FakeLlm) -> None:
    total, in_flight, peak, started = 6, 0, 0, 0
    changed = threading.Condition()

    def slow(seen: Seen) -> Answer:
        # Each request waits for a partner (so an overlap is sure, not left to timing), except
        # the last one; a third request in flight would show in ``peak``.
        nonlocal in_flight, peak, started
        with changed:
            in_flight, started = in_flight + 1, started + 1
            peak = max(peak, in_flight)
            changed.notify_all()
            changed.wait_for(lambda: in_flight >= 2 or started == total, timeout=5)
        time.sleep(0.05)
        with changed:
            in_flight -= 1
        return Answer(GOOD)

    fake.script.extend([slow] * total)
    llm = OllamaChat(fake.url, "m", concurrency=2, **{**FAST, "timeout": 10.0})
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for _ in range(total):
                nursery.start_soon(llm.complete_json, "s", [{"role": "user", "content": "u"}], Pets)
        await llm.aclose()
    assert len(fake.seen) == total
    assert peak == 2


def test_make_llm_is_none_by_default_and_builds_each_provider(tmp_path: Path) -> None:
    assert make_llm(LlmConfig()) is None
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    openai = make_llm(
        LlmConfig(provider="openai", url="http://127.0.0.1:8080/v1", model="gpt", api_key_file=str(key_file))
    )
    assert isinstance(openai, OpenAIChat) and openai.describe()["url"] == "http://127.0.0.1:8080/v1/chat/completions"
    ollama = make_llm(LlmConfig(provider="ollama", url="http://127.0.0.1:11434", model="llama3.2", concurrency=3))
    assert isinstance(ollama, OllamaChat) and ollama.describe()["url"] == "http://127.0.0.1:11434/api/chat"


async def test_make_llm_reads_the_key_file_and_sends_it(fake: FakeLlm, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    llm = make_llm(LlmConfig(provider="openai", url=fake.url, model="m", api_key_file=str(key_file)))
    assert llm is not None
    fake.script.append(Answer(GOOD))
    await ask(llm)
    assert fake.seen[0].headers["Authorization"] == "Bearer sk-from-file"


BAD_CONFIGS = [
    pytest.param(LlmConfig(provider="ollama", model="m"), "llm.url is required", id="no-url"),
    pytest.param(LlmConfig(provider="openai", url="http://h"), "llm.model is required", id="no-model"),
    pytest.param(LlmConfig(provider="ollama", url="ftp://h", model="m"), "llm.url", id="bad-scheme"),
    pytest.param(
        LlmConfig(provider="openai", url="http://h", model="m", api_key="k", api_key_file="/x"),
        "both set",
        id="two-keys",
    ),
    pytest.param(
        LlmConfig(provider="openai", url="http://h", model="m", api_key_file="/nonexistent/k"),
        "llm.api_key_file",
        id="no-key-file",
    ),
]


@pytest.mark.parametrize(("settings", "message"), BAD_CONFIGS)
def test_make_llm_refuses_bad_settings_naming_the_key(settings: LlmConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_llm(settings)
