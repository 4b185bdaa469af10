"""The method table: every JSON-RPC method memoryd serves, with its params type."""

from __future__ import annotations

from memoryd.rpc.dispatch import MethodTable
from memoryd.service.context import ContextService
from memoryd.service.conversation import ConversationService
from memoryd.service.health import HealthReporter
from memoryd.service.memory import MemoryService
from memoryd.service.params import (
    AddParams,
    DeleteParams,
    ExtractFromMessagesParams,
    ExtractParams,
    GetParams,
    HealthParams,
    HistoryParams,
    ListParams,
    ObserveParams,
    SearchParams,
)
from memoryd.service.people import PeopleService
from memoryd.service.people_params import (
    ContextParams, ForgetPersonParams, PersonAliasParams, PersonGetParams, PersonListParams, PersonMergeParams,
    SummaryParams,
)
from memoryd.service.summary import SummaryService


def build_method_table(
    service: MemoryService,
    health: HealthReporter,
    people: PeopleService | None = None,
    summaries: SummaryService | None = None,
    conversations: ConversationService | None = None,
) -> MethodTable:
    table = MethodTable()
    table.register("memory.add", AddParams, service.add)
    table.register("memory.search", SearchParams, service.search)
    table.register("memory.list", ListParams, service.list)
    table.register("memory.get", GetParams, service.get)
    table.register("memory.delete", DeleteParams, service.delete)
    table.register("memory.history", HistoryParams, service.history)
    if conversations is not None:
        table.register("memory.observe", ObserveParams, conversations.observe)
        table.register("memory.extract", ExtractParams, conversations.extract)
        table.register("memory.extract_from_messages", ExtractFromMessagesParams, conversations.extract_from_messages)
    table.register("system.health", HealthParams, health.health)
    if people is not None and summaries is not None:
        register_people_methods(table, ContextService(service, people, summaries, service.authenticator))
    return table


def register_people_methods(table: MethodTable, context: ContextService) -> None:
    people, summaries = context.people, context.summaries
    table.register("person.list", PersonListParams, people.list)
    table.register("person.get", PersonGetParams, people.get)
    table.register("person.merge", PersonMergeParams, people.merge)
    table.register("person.alias", PersonAliasParams, people.alias)
    table.register("memory.forget_person", ForgetPersonParams, people.forget)
    table.register("memory.context", ContextParams, context.context)
    table.register("memory.summary", SummaryParams, summaries.summary)
