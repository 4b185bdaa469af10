"""memory.observe, memory.extract and memory.extract_from_messages (ash's shapes).

observe only stores (one write, answered at once) and nudges the extraction worker; the two
extract methods call the LLM while the caller waits and answer ``{"stored", "ids"}``.  With
``[llm] provider = "none"`` observe still stores, and the extract methods answer -32008.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import trio

from memoryd.auth import Authenticator, Caller
from memoryd.errors import ExtractedMessagesGone, LlmNotConfigured, Overloaded
from memoryd.extract import ConversationMessage, Speaker
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd.service.extraction import ExtractionWorker
from memoryd.service.extractor import Extractor
from memoryd.service.learning import conversation_of, origin_of
from memoryd.service.observe_quota import ObserveQuota
from memoryd.service.params import (
    MAX_CONTENT_BYTES,
    CallerParams,
    ExtractFromMessagesParams,
    ExtractParams,
    MessageParam,
    ObserveParams,
)
from memoryd.service.provenance import adding_scope, identify
from memoryd.service.secret_guard import SecretsGuard
from memoryd.service.validation import check_group_chat, check_text, optional_text
from memoryd.store import ConversationStore, MessagesRead, Scope, SessionContext, SessionRef, StoredMessage
from memoryd.store.conversation_records import LearnedFrom

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.service")

NOT_IN_SESSION = "Message not found in session"
#: The longest an observe call refused by a quota waits before its answer.
REFUSAL_PAUSE_SECONDS = 1.0


@dataclass
class ConversationService:
    """memory.observe and the extract methods."""

    conversations: ConversationStore
    extractor: Extractor
    _: KW_ONLY
    #: None: extraction is off (observe still stores the messages).
    llm: LlmClient | None
    #: The background worker, which observe wakes; None without an LLM.
    worker: ExtractionWorker | None
    authenticator: Authenticator
    #: Keep each observed message as a searchable memory of type ``episode``.
    episodes: bool = False
    #: Told when episodes were stored (they wait for their embeddings: the backfill).
    on_episodes: Callable[[], None] | None = None
    #: Observed messages are stored with any credential in them redacted.
    secrets: SecretsGuard | None = None
    #: Per-user bounds on what observe stores and queues; None: unbounded.
    quota: ObserveQuota | None = None

    async def observe(self, params: ObserveParams, ctx: CallContext) -> dict[str, Any]:
        caller = identify(params, ctx, self.authenticator)
        scope = adding_scope(caller, params)
        _check_messages(params.messages)
        session = SessionRef(scope.user_id, scope.chat_id, self._session_key(params.session_key))
        kept = [message for message in params.messages if message.content.strip()]
        if kept and self.quota is not None:
            try:
                await self._admit(session, kept)  # before the secrets scan: a refusal costs little
            except Overloaded as refused:
                # Answered after a pause (at most a second): a client that ignores retry_after
                # cannot spin on refusals, each of which still cost the daemon a decode.
                await trio.sleep(min(float(refused.data["retry_after"]), REFUSAL_PAUSE_SECONDS))
                raise
        redact = self.secrets.redact_observed if self.secrets is not None else _unchanged
        stored = [_stored(message, redact) for message in kept]
        # Without an LLM nothing would ever run the job: store the messages only.
        debounce_ms = None if self.worker is None else int(self.extractor.settings.debounce_seconds * 1000)
        accepted = 0
        if stored:
            accepted = await self.conversations.observe(
                session, _context(caller, params), stored, extract_after_ms=debounce_ms, episodes=self.episodes
            )
            if self.episodes and self.on_episodes is not None:
                self.on_episodes()
        if self.worker is not None:
            self.worker.notify()
        log.debug("conversation.observed", extra=fields(messages=accepted))
        return {"accepted": accepted}

    async def _admit(self, session: SessionRef, stored: Sequence[MessageParam]) -> None:
        """Raise Overloaded when the call is past one of the user's bounds (nothing stored)."""
        quota = self.quota
        assert quota is not None
        if self.worker is not None:
            queued, this_one = await self.conversations.queued_extractions(session)
            if not this_one and queued >= quota.limits.queued_extractions:
                quota.refuse_queue(self.extractor.settings.debounce_seconds + 1.0)
        size = sum(len(m.content.encode("utf-8", "surrogatepass")) for m in stored)
        quota.admit(session.owner, session.key, len(stored), size)

    async def extract_from_messages(self, params: ExtractFromMessagesParams, ctx: CallContext) -> dict[str, Any]:
        # Who is calling first: a caller without a valid token learns nothing, not even the config.
        caller = identify(params, ctx, self.authenticator)
        llm = self._llm()
        scope = adding_scope(caller, params)
        _check_messages(params.messages)
        check_group_chat(params.shared, scope.chat_id)
        messages = [_conversation_message(message) for message in params.messages]
        session_key = self._session_key(optional_text(params.session_key))
        # The messages are not stored, so nothing else would tell that the user was erased
        # (memory.forget_all, forget-user) while the LLM answered: an erasure that answered
        # success must leave nothing learned before it, from a call in flight neither.
        seen = await self.conversations.erasures_seen(scope.user_id)
        try:
            return await self._extract_now(
                llm,
                messages,
                caller,
                scope,
                params,
                session_key=session_key,
                message_id=optional_text(_text_id(params.message_id)),
                all_shared=params.shared,
                read=seen,
            )
        except ExtractedMessagesGone:
            log.info("conversation.extracted_after_erasure")
            return {"stored": 0, "ids": [], "refreshed": []}

    async def extract(self, params: ExtractParams, ctx: CallContext) -> dict[str, Any]:
        caller = identify(params, ctx, self.authenticator)
        llm = self._llm()
        scope = adding_scope(caller, params)
        check_group_chat(params.shared, scope.chat_id)
        found = None
        if params.message_id is not None:
            message_id = str(params.message_id)
            found = await self.conversations.window(
                SessionRef(scope.user_id, scope.chat_id, _key_text(params.session_key) or None),
                message_id,
                self.extractor.settings.context_messages,
            )
        if found is None:
            return {"stored": 0, "ids": [], "error": NOT_IN_SESSION}
        session, stored = found
        try:
            return await self._extract_now(
                llm,
                conversation_of(stored),
                caller,
                scope,
                params,
                session_key=session.session_key,
                message_id=message_id,
                all_shared=params.shared,
                read=MessagesRead.of(session, stored),
            )
        except ExtractedMessagesGone:
            # Erased (memory.forget_all, forget-user) while the LLM answered: what it learned
            # from them is not stored, and the message is no longer in the session.
            return {"stored": 0, "ids": [], "error": NOT_IN_SESSION}

    def describe(self, queue: dict[str, Any]) -> dict[str, Any]:
        """system.health's "extraction": the LLM, the queue's numbers (``ConversationStore.status``:
        backlog in sessions, parked jobs, the last error), the worker's; never message contents."""
        state: dict[str, Any] = {"provider": "none", "state": "disabled"}
        if self.llm is not None:
            state = dict(self.llm.describe())
        state.update(queue)
        state.update(self.extractor.learner.describe())
        if self.worker is not None:
            state.update(self.worker.describe())
        return state

    def _session_key(self, key: str | None) -> str | None:
        """``key`` as the sessions table and a memory's ``source_session`` store it: a key that
        holds a credential is refused (-32602, ``session_key``) before anything is stored."""
        key = _key_text(key)
        if key is None or self.secrets is None:
            return key
        return self.secrets.screen_identifier("session_key", key)

    def _llm(self) -> LlmClient:
        if self.llm is None:
            raise LlmNotConfigured()
        return self.llm

    async def _extract_now(
        self,
        llm: LlmClient,
        messages: Sequence[ConversationMessage],
        caller: Caller,
        scope: Scope,
        params: CallerParams,
        *,
        session_key: str | None,
        message_id: str | None,
        all_shared: bool = False,
        read: LearnedFrom | None = None,
    ) -> dict[str, Any]:
        speaker = _speaker(caller, params)
        origin = origin_of(
            messages,
            speaker,
            chat_type=caller.routing.chat_type,
            session_key=session_key,
            message_id=message_id,
            all_shared=all_shared,
        )
        learned = await self.extractor.extract(
            llm, messages, speaker, origin, scope, timezone=optional_text(params.timezone), read=read
        )
        new_ids = [item.memory_id for item in learned if not item.refreshed]
        return {
            "stored": len(new_ids),
            "ids": new_ids,
            "refreshed": [item.memory_id for item in learned if item.refreshed],
        }


def _check_messages(messages: Sequence[MessageParam]) -> None:
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        check_text(f"{field}.content", message.content, max_bytes=MAX_CONTENT_BYTES, allow_blank=True)
        # Stored beside the content: text every engine can store (no NUL), like the content.
        for name in ("id", "username", "display_name", "user_id"):
            value = getattr(message, name)
            if isinstance(value, str):
                check_text(f"{field}.{name}", value, allow_blank=True)


def _key_text(key: str | None) -> str | None:
    """A session key every engine can store and look up (no NUL: -32602 naming it)."""
    return None if key is None else check_text("session_key", key, allow_blank=True)


def _text_id(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _sent_at(message: MessageParam) -> str | float | None:
    if isinstance(message.timestamp, datetime):
        return message.timestamp.isoformat()
    return message.timestamp


def _unchanged(text: str) -> str:
    return text


def _stored(message: MessageParam, redact: Callable[[str], str]) -> StoredMessage:
    return StoredMessage(
        seq=0,
        role=message.role,
        content=redact(message.content),
        message_id=None if message.id is None else str(message.id),
        sent_at=_sent_at(message),
        username=None if message.username is None else redact(message.username),
        display_name=None if message.display_name is None else redact(message.display_name),
        user_id=message.user_id,
    )


def _conversation_message(message: MessageParam) -> ConversationMessage:
    return ConversationMessage(
        role=message.role,
        content=message.content,
        id=None if message.id is None else str(message.id),
        timestamp=message.timestamp,
        username=message.username,
        display_name=message.display_name,
        user_id=message.user_id,
    )


def _speaker(caller: Caller, params: CallerParams) -> Speaker:
    """Who spoke, from the resolved identity as memory.add records it (``provenance_of``): in
    token mode the claims, never a param the token has no claim for.  ash's loose ``username``
    stands in for the speaker only when the caller's params are believed (trust mode)."""
    routing = caller.routing
    fallback = None if caller.verified else optional_text(params.username)
    return Speaker(username=routing.source_username or fallback, display_name=routing.source_display_name)


def _context(caller: Caller, params: ObserveParams) -> SessionContext:
    speaker = _speaker(caller, params)
    return SessionContext(
        chat_type=caller.routing.chat_type,
        timezone=optional_text(params.timezone),
        speaker_username=speaker.username,
        speaker_display_name=speaker.display_name,
    )
