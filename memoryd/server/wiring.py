"""Who talks to whom: the services and workers built from the config over an open store.

``daemon.py`` decides the order things start and stop in; this module only builds the graph
(no I/O, nothing started), so a bad setting (``supersession.decider = "llm"`` without an LLM)
stops start-up before the socket exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memoryd.auth import Authenticator
from memoryd.config import Config
from memoryd.embed import Embedder
from memoryd.errors import ConfigError
from memoryd.rpc.dispatch import MethodTable
from memoryd.service.backfill import EmbeddingBackfill
from memoryd.service.conversation import ConversationService
from memoryd.service.erasure_watch import ErasureWatch
from memoryd.service.extraction import ExtractionWorker
from memoryd.service.extractor import Extractor
from memoryd.service.health import HealthReporter
from memoryd.service.learning import FactLearner
from memoryd.service.memory import MemoryService
from memoryd.service.methods import build_method_table
from memoryd.service.observe_quota import ObserveLimits, ObserveQuota
from memoryd.service.people import PeopleService
from memoryd.service.secret_guard import SecretsGuard
from memoryd.service.summary import SummaryService
from memoryd.service.supersession import Supersession
from memoryd.service.supersession_worker import SupersessionWorker
from memoryd.store.interfaces import Backend

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient


@dataclass
class Services:
    """The method table and the background workers the daemon runs beside it."""

    table: MethodTable
    health: HealthReporter
    summaries: SummaryService
    supersession_worker: SupersessionWorker
    #: None without an embedder (nothing to backfill).
    backfill: EmbeddingBackfill | None
    #: None without an LLM (extraction off).
    extraction: ExtractionWorker | None
    #: The people service (its per-owner caches are dropped when another daemon changes people).
    people: PeopleService | None = None


def build_services(
    config: Config,
    store: Backend,
    embedder: Embedder | None,
    llm: LlmClient | None,
    authenticator: Authenticator,
    server_stats: Callable[[], bytes],
) -> Services:
    backfill = None
    if embedder is not None:
        backfill = EmbeddingBackfill(store, embedder, batch_size=config.embed.batch_size)
    guard = SecretsGuard(config.extraction.secrets)
    people = PeopleService(store.people, authenticator, max_people=config.limits.max_people_per_owner or None)
    summaries = SummaryService(store.people, authenticator, llm, config.summary)
    supersession, supersession_worker = _supersession(config, store, llm, people)
    service = MemoryService(
        store.memories,
        embedder,
        backfill,
        add_wait=config.embed.add_wait,
        query_timeout=config.embed.query_timeout,
        authenticator=authenticator,
        people=people,
        supersession=supersession,
        secrets=guard,
        max_subjects=config.limits.max_subjects_per_memory,
    )
    service.on_added.append(summaries.note_added)
    service.on_deleted.append(summaries.note_deleted)
    service.on_erased.append(summaries.forget_user)
    service.on_erased.append(people.forget_directory)
    service.on_group_erased.append(summaries.forget_group_chats)
    people.on_changed.append(summaries.note_deleted)
    # `memoryd forget-user` beside this daemon: checked before a cached summary is answered.
    erasures = ErasureWatch(store.people)
    erasures.on_erased += [summaries.forget_erased, people.forget_erased]
    erasures.on_group_erased.append(summaries.forget_group_chats)
    summaries.erasure_watch = people.erasure_watch = erasures
    conversations, extraction = _conversations(config, store, service, people, guard, llm, authenticator)
    health = HealthReporter(service, backfill, server_stats, jobs=store.jobs, conversations=conversations)
    table = build_method_table(service, health, people, summaries, conversations, config.context)
    return Services(table, health, summaries, supersession_worker, backfill, extraction, people)


def _conversations(
    config: Config,
    store: Backend,
    service: MemoryService,
    people: PeopleService,
    guard: SecretsGuard,
    llm: LlmClient | None,
    authenticator: Authenticator,
) -> tuple[ConversationService, ExtractionWorker | None]:
    """observe and the extract methods; the extraction worker too when an LLM is configured."""
    learner = FactLearner(
        store.conversations,
        service.embedder,
        service.backfill,
        embed_timeout=config.embed.query_timeout,
        # People and summaries learn of extracted memories too (memory.add learns people
        # inside its own transaction, so people are not among the service's listeners).
        on_added=[people.learn, *service.on_added],
        supersession=service.supersession,
    )
    extractor = Extractor(learner, guard, config.extraction)
    worker = None
    if llm is not None:
        worker = ExtractionWorker(store.conversations, llm, extractor, concurrency=config.llm.concurrency)
    limits = config.limits
    quota = ObserveQuota(
        ObserveLimits(
            messages_per_minute=limits.observe_messages_per_minute,
            bytes_per_minute=limits.observe_bytes_per_minute,
            sessions=limits.max_observed_sessions_per_user,
            queued_extractions=limits.max_queued_extractions_per_user,
        )
    )
    conversations = ConversationService(
        store.conversations,
        extractor,
        llm=llm,
        worker=worker,
        authenticator=authenticator,
        secrets=guard,
        quota=quota,
        episodes=config.episodes.enabled,
        on_episodes=None if service.backfill is None else service.backfill.notify,
    )
    return conversations, worker


def _supersession(
    config: Config, store: Backend, llm: LlmClient | None, people: PeopleService
) -> tuple[Supersession, SupersessionWorker]:
    """Who decides supersession: the offline rules inline, or the LLM in the background; the
    owner's people tell the rules that "my wife" and "Sarah" are one subject."""
    decider = config.supersession.decider
    if decider == "llm" and llm is None:
        raise ConfigError('supersession.decider = "llm" needs an [llm] provider (url and model)')
    use_llm = llm is not None and decider != "rules"
    supersession = Supersession(
        store.supersession, config.supersession, use_llm=use_llm, resolver_for=people.resolver_for
    )
    # Without an LLM the worker still drains jobs a previous run (with one) left, by the rules.
    worker = SupersessionWorker(supersession, llm.complete_json if use_llm and llm is not None else None)
    supersession.on_queued = worker.notify
    return supersession, worker
