"""Chat completions that must come back as JSON of a given shape, over httpx.

One call, :meth:`LlmClient.complete_json`, asks for a msgspec Struct and returns one, or
raises an :class:`~memoryd.errors.LlmError`:

- connect errors, timeouts, 408/429/5xx are retried with exponential backoff and jitter,
  at least the server's ``Retry-After`` (a hint longer than ``max_backoff`` ends the call at
  once with :class:`LlmUnavailable` carrying it, for the job queue to honour);
- a reply that is empty, not JSON or not the shape is retried too (models are not
  deterministic), then raises :class:`LlmBadReply`;
- a 400 while asking for structured output steps down to the next output mode (JSON schema,
  then plain JSON, then no format at all); the mode that worked is kept for later calls.
  Other 4xx raise :class:`LlmRefused` at once.

Errors and logs name the server and the reason, never the API key or the conversation.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, TypeVar, Unpack

import msgspec
import trio

from memoryd.errors import LlmBadReply, LlmRefused, LlmUnavailable
from memoryd.http_backend import HttpBackend, Refused, Retryable, ServerOptions, backoff_delay
from memoryd.llm.schema import BadReply, decode_reply, json_schema
from memoryd.log import fields

log = logging.getLogger("memoryd.llm")

T = TypeVar("T", bound=msgspec.Struct)

#: A chat message as the APIs take it: {"role": "user" | "assistant", "content": str}.
ChatMessage = dict[str, str]


class LlmClient(HttpBackend):
    """Shared machinery; :class:`~memoryd.llm.openai.OpenAIChat` and
    :class:`~memoryd.llm.ollama.OllamaChat` fill in the wire format: its constants as class
    keywords (as msgspec's Structs take their config), checked when the class is defined, and
    :meth:`request_options` and :meth:`text_of`."""

    provider: ClassVar[str]
    path: ClassVar[str]
    #: Output modes this API knows, strictest first; a 400 steps down one.
    modes: ClassVar[tuple[str, ...]]
    #: The response envelope, decoded before the model's own text.
    reply_type: ClassVar[type[msgspec.Struct]]

    default_timeout = 120.0
    default_retries = 2

    def __init_subclass__(
        cls, *, provider: str, path: str, modes: tuple[str, ...], reply_type: type[msgspec.Struct], **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if not modes:
            raise TypeError(f"{cls.__name__} declares no output mode")
        cls.provider, cls.path, cls.modes, cls.reply_type = provider, path, modes, reply_type

    def __init__(
        self,
        url: str,
        model: str,
        *,
        concurrency: int = 2,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        **options: Unpack[ServerOptions],
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        super().__init__(url, self.path, label=self.provider, model=model, **options)
        self._limiter = trio.CapacityLimiter(concurrency)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._mode = 0

    def describe(self) -> dict[str, Any]:
        """For system.health: never the key."""
        return {
            "provider": self.provider,
            "model": self.model,
            "output_mode": self.modes[self._mode],
            **self.connection_status(),
        }

    async def complete_json(self, system: str, messages: list[ChatMessage], schema_struct: type[T]) -> T:
        """Ask the model; return its reply decoded as ``schema_struct`` (see the module doc)."""
        await self.start()
        try:
            result = await self._complete(system, messages, schema_struct)
        except (LlmUnavailable, LlmRefused, LlmBadReply) as exc:
            self._failed(exc)
            raise
        self._succeeded()
        return result

    async def _complete(self, system: str, messages: list[ChatMessage], struct: type[T]) -> T:
        schema = json_schema(struct)
        attempts, attempt, mode = self._retries + 1, 0, self._mode
        while True:
            payload = self.payload(system, messages, schema, struct.__name__, self.modes[mode])
            try:
                body = await self._send(msgspec.json.encode(payload))
                result = decode_reply(self.reply_text(body), struct)
            except Refused as refused:
                if refused.status == 400 and mode + 1 < len(self.modes):
                    log.warning(
                        "llm refused the output mode, stepping down",
                        extra=fields(provider=self.provider, mode=self.modes[mode], next=self.modes[mode + 1]),
                    )
                    mode += 1  # not an attempt: the server told us what it cannot do
                    continue
                raise LlmRefused(f"{self._http.where}: {refused.reason}") from None
            except (Retryable, BadReply) as failure:
                attempt += 1
                reason = failure.reason if isinstance(failure, Retryable) else str(failure)
                hint = failure.retry_after if isinstance(failure, Retryable) else None
                if attempt == attempts or (hint is not None and hint > self._max_backoff):
                    raise self._gave_up(failure, reason, attempt) from None
                delay = backoff_delay(attempt - 1, base=self._backoff, cap=self._max_backoff, hint=hint)
                log.warning(
                    "llm request failed, retrying",
                    extra=fields(provider=self.provider, reason=reason, attempt=attempt, delay=round(delay, 3)),
                )
                await trio.sleep(delay)
                continue
            self._mode = mode  # what worked is where the next call starts
            return result

    def _gave_up(self, failure: Exception, reason: str, attempts: int) -> LlmUnavailable | LlmBadReply:
        message = f"{self._http.where}: {reason} (after {attempts} attempt{'s' if attempts > 1 else ''})"
        if isinstance(failure, Retryable):
            return LlmUnavailable(message, failure.retry_after)
        return LlmBadReply(message)

    async def _send(self, payload: bytes) -> bytes:
        async with self._limiter:
            return await self._http.post(payload)

    # The wire format: the common part here, the rest per API.

    def payload(
        self, system: str, messages: list[ChatMessage], schema: dict[str, Any], name: str, mode: str
    ) -> dict[str, Any]:
        """The request body for output ``mode`` (one of :attr:`modes`)."""
        conversation = [{"role": "system", "content": system}, *messages]
        body = {"model": self.model, "messages": conversation, "stream": False}
        return body | self.request_options(mode, schema, name)

    def reply_text(self, body: bytes) -> str:
        """The assistant message's text from a response body; raises BadReply."""
        try:
            reply = msgspec.json.decode(body, type=self.reply_type)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadReply(f"not a chat reply: {exc}") from None
        return self.text_of(reply)

    def request_options(self, mode: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
        """This API's sampling options and output format for ``mode``."""
        raise NotImplementedError

    def text_of(self, reply: Any) -> str:
        """The text of a decoded :attr:`reply_type`; raises BadReply (cut off, refused)."""
        raise NotImplementedError
