"""The method table: every JSON-RPC method memoryd serves, with its params type."""

from __future__ import annotations

import msgspec

from memoryd.config import ContextConfig
from memoryd.rpc.dispatch import Handler, MethodTable
from memoryd.service.context import ContextService
from memoryd.service.conversation import ConversationService
from memoryd.service.health import HealthReporter
from memoryd.service.memory import MemoryService
from memoryd.service.params import (
    AddParams,
    DeleteParams,
    ExtractFromMessagesParams,
    ExtractParams,
    ForgetAllParams,
    GetParams,
    HealthParams,
    HistoryParams,
    ListParams,
    ObserveParams,
    SearchParams,
)
from memoryd.service.people import PeopleService
from memoryd.service.people_params import (
    ContextParams,
    ForgetPersonParams,
    PersonAliasParams,
    PersonGetParams,
    PersonListParams,
    PersonMergeParams,
    SummaryParams,
)
from memoryd.service.summary import SummaryService

#: Methods that wait for the LLM while the caller waits: their deadline covers the LLM's
#: longest call (the daemon's RpcServer gives it), not only limits.request_timeout.
WAITS_FOR_LLM = ("memory.extract", "memory.extract_from_messages")
#: memory.context's settings when the caller passes none (the config's defaults).
_CONTEXT_DEFAULTS = ContextConfig()


def build_method_table(
    service: MemoryService,
    health: HealthReporter,
    people: PeopleService,
    summaries: SummaryService,
    conversations: ConversationService,
    context_config: ContextConfig = _CONTEXT_DEFAULTS,
) -> MethodTable:
    context = ContextService(service, people, summaries, service.authenticator, context_config)
    table = MethodTable()
    methods: list[tuple[str, type[msgspec.Struct], Handler]] = [
        ("memory.add", AddParams, service.add),
        ("memory.search", SearchParams, service.search),
        ("memory.list", ListParams, service.list),
        ("memory.get", GetParams, service.get),
        ("memory.delete", DeleteParams, service.delete),
        # Same params as delete (a memory id or unique prefix), same visibility.
        ("memory.pin", DeleteParams, service.pin),
        ("memory.unpin", DeleteParams, service.unpin),
        ("memory.history", HistoryParams, service.history),
        ("memory.forget_all", ForgetAllParams, service.forget_all),
        ("memory.observe", ObserveParams, conversations.observe),
        ("memory.extract", ExtractParams, conversations.extract),
        ("memory.extract_from_messages", ExtractFromMessagesParams, conversations.extract_from_messages),
        ("memory.forget_person", ForgetPersonParams, people.forget),
        ("memory.context", ContextParams, context.context),
        ("memory.summary", SummaryParams, summaries.summary),
        ("person.list", PersonListParams, people.list),
        ("person.get", PersonGetParams, people.get),
        ("person.merge", PersonMergeParams, people.merge),
        ("person.alias", PersonAliasParams, people.alias),
    ]
    for name, params_type, handler in methods:
        table.register(name, params_type, handler)
    # health also answers inline in the read loop while its numbers are fresh (service/health.py).
    table.register("system.health", HealthParams, health.health, now=health.health_now)
    return table
