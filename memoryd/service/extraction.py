"""The extraction worker: turns quiet sessions of observed messages into memories, durably.

Jobs are rows (``store.conversations``): one per session, due once the session has been quiet
for ``extraction.debounce_seconds``.  The worker leases a due job, asks the LLM about the
messages past the session's high-water mark, and stores the facts and the new mark in one
transaction.  A failure the LLM may get over (down, slow, 429/5xx) is retried with backoff,
never sooner than the server's Retry-After; a refusal or replies that never decode, or
``extraction.max_attempts`` failures, park the job with the reason until `memoryd jobs retry`.
Nothing here is on the path of memory.add, observe or search: a down LLM only grows the backlog.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import trio

from memoryd.errors import (
    DiskFull,
    ExtractionJobGone,
    LlmError,
    LlmUnavailable,
    StoreBusy,
    StoreCorrupt,
    StoreUnreachable,
)
from memoryd.extract import Speaker
from memoryd.ids import DAY_MS
from memoryd.log import fields
from memoryd.service.extractor import Extractor
from memoryd.service.learning import conversation_of, origin_of
from memoryd.service.wakeup import Wakeup
from memoryd.store import ConversationStore, ExtractionJob, Scope

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.extraction")


class ExtractionWorker:
    def __init__(
        self,
        conversations: ConversationStore,
        llm: LlmClient,
        extractor: Extractor,
        *,
        concurrency: int,
    ) -> None:
        self.conversations = conversations
        self.llm = llm
        self.extractor = extractor
        self._slots = trio.Semaphore(concurrency)
        #: How far back the backlog of never-extracted messages is read (extraction.retention_days).
        self.retention_days = extractor.settings.retention_days
        self._wakeup = Wakeup()
        self.last_error: str | None = None
        self.sessions_extracted = 0
        self.failures = 0

    def notify(self) -> None:
        """New messages arrived: look at the due times again."""
        self._wakeup.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Whatever a previous run had leased (a crash, kill -9) is due again now.
        await trio.to_thread.run_sync(self.conversations.clear_leases)
        # What was observed while extraction was off is extracted now, oldest first.
        backlog = await trio.to_thread.run_sync(
            functools.partial(self.conversations.schedule_backlog, retention_ms=int(self.retention_days * DAY_MS))
        )
        if backlog:
            log.info("extraction.backlog_scheduled", extra=fields(sessions=backlog))
        task_status.started()
        async with trio.open_nursery() as nursery:
            while True:
                await self._slots.acquire()
                try:
                    job = await self._next_job()
                except BaseException:
                    self._slots.release()
                    raise
                nursery.start_soon(self._run_job, job)

    def describe(self) -> dict[str, Any]:
        return {
            "sessions_extracted_since_start": self.sessions_extracted,
            "failures_since_start": self.failures,
            "worker_last_error": self.last_error,
        }

    async def _next_job(self) -> ExtractionJob:
        while True:
            self._wakeup.arm()
            try:
                jobs = await self.conversations.claim(1, self.extractor.settings.max_messages)
            except Exception:
                log.exception("extraction.claim_failed")
                jobs = []
            if jobs:
                return jobs[0]
            await self._sleep_until_due()

    async def _sleep_until_due(self) -> None:
        try:
            due_ms = await self.conversations.next_due_ms()
        except Exception:
            due_ms = None
        await self._wakeup.sleep(due_ms)

    async def _run_job(self, job: ExtractionJob) -> None:
        try:
            await self._extract(job)
            self.sessions_extracted += 1
        except LlmError as exc:
            await self._failed(job, exc, park=not exc.retry_later, retry_after=_retry_after(exc))
        except ExtractionJobGone:
            # Erased while the LLM answered, or taken over by another daemon: not a failure, and
            # nothing is left to retry or park.
            log.info("extraction.job_gone")
        except (DiskFull, StoreBusy, StoreCorrupt, StoreUnreachable) as exc:
            # Not the job's fault and not an attempt (a full disk, another process's lock held
            # too long): it is claimed again once its lease runs out.
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("extraction.store_unavailable", extra=fields(error=self.last_error))
        except Exception as exc:
            # A bug or a store error: logged in full, retried like any failure, parked in the end.
            log.exception("extraction.failed")
            await self._failed(job, exc, park=False, retry_after=None)
        finally:
            self._slots.release()
            # The loop may be asleep until this job's lease ran out: its new due time counts now.
            self.notify()

    async def _extract(self, job: ExtractionJob) -> None:
        session, context = job.session, job.context
        messages = conversation_of(job.messages)
        speaker = Speaker(username=context.speaker_username, display_name=context.speaker_display_name)
        origin = origin_of(messages, speaker, chat_type=context.chat_type, session_key=session.session_key)
        # The caller that observed the session, as far as the session tells: a chat whose type
        # is unknown counts as a group (fail closed), so nothing hidden there is matched.
        scope = Scope(
            user_id=session.owner,
            chat_id=session.chat_id,
            chat_type=context.chat_type,
            verified=session.chat_id is not None,
        )
        learned = await self.extractor.extract(
            self.llm, messages, speaker, origin, scope, timezone=context.timezone, completes=job
        )
        log.info(
            "extraction.done",
            extra=fields(messages=len(messages), facts=len(learned), refreshed=sum(i.refreshed for i in learned)),
        )

    async def _failed(self, job: ExtractionJob, exc: Exception, *, park: bool, retry_after: float | None) -> None:
        self.failures += 1
        reason = f"{type(exc).__name__}: {exc}"
        self.last_error = reason
        park = park or job.attempts + 1 >= self.extractor.settings.max_attempts
        try:
            attempts = await self.conversations.fail(
                job, reason, park=park, retry_after_ms=int((retry_after or 0) * 1000)
            )
        except Exception:
            # The lease runs out and the job is claimed again: nothing is lost.
            log.exception("extraction.fail_not_recorded")
            return
        log.warning(
            "extraction.parked" if park else "extraction.retry_later",
            extra=fields(error=reason, attempts=attempts),
        )


def _retry_after(exc: LlmError) -> float | None:
    return exc.retry_after if isinstance(exc, LlmUnavailable) else None
