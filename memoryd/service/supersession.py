"""Supersession: a newer memory replaces the older ones it contradicts.

Every store of a memory (``memory.add``, extraction) goes through :meth:`Supersession.store`:

- the explicit ``supersedes`` target and the ``key`` upsert apply inline, always;
- with the offline rules (``[supersession] decider = "rules"``, or ``auto`` without an LLM) the
  rules judge the candidates inline, in the add's own write transaction: they are pure and take
  microseconds, so the add stays one transaction and a search right after sees the result;
- with an LLM the add only queues a durable 'supersede' job: the model never slows
  ``memory.add``; :mod:`memoryd.service.supersession_worker` decides after the reply.

Who said a memory decides first-person vs hearsay: ``source_username`` is the speaker unless it
is the owner (``knowledge.conflict.Statement.speaker`` is set only for someone else).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypedDict, Unpack

from memoryd.config import SupersessionConfig
from memoryd.knowledge import Resolver, Statement, attribute_keys, decide
from memoryd.knowledge.attributes import SELF
from memoryd.knowledge.conflict import Decision
from memoryd.store import MemoryRecord, NewMemory, Scope
from memoryd.store.interfaces import SupersessionStore
from memoryd.store.supersession_records import Judge, Plan, Ruling, Stored

#: The people the adder may know of, for "my wife" = "Sarah": the people feature plugs in here
#: (awaited once per add that sets an attribute, before the write transaction, so it may read
#: the store); None: only the owner's own id is known (it maps to ``SELF``).  Given the adder's
#: scope, not just the owner: a wife known only from a private chat must not make a group
#: chat's "my wife" and "Sarah" one subject (the ruling and its reason would tell).
ResolverFor = Callable[[Scope], Awaitable[Resolver | None]]


class AddOptions(TypedDict, total=False):
    """What the adder asks of a store beyond the memory: the :class:`Plan` fields of that name."""

    supersedes: str | None
    key: str | None
    owner_names: tuple[str, ...] | None
    embeds_itself: bool


def statement_of(record: MemoryRecord) -> Statement:
    """A stored memory as the conflict rules see it."""
    speaker = record.source_username if record.source_username not in (None, "", record.owner) else None
    return Statement(record.content, tuple(record.subjects), speaker, record.created_at)


def owner_resolver(owner: str, people: Resolver | None) -> Resolver:
    """The owner's own id is ``SELF``; anything else goes to the people resolver, if any."""

    def resolve(phrase: str) -> str | None:
        if phrase == owner:
            return SELF
        return people(phrase) if people is not None else None

    return resolve


def ruling_of(decision: Decision) -> Ruling:
    return Ruling(decision.supersedes, decision.reason, decision.decided_by, decision.key)


class Supersession:
    def __init__(
        self,
        store: SupersessionStore,
        settings: SupersessionConfig,
        *,
        use_llm: bool,
        resolver_for: ResolverFor | None = None,
        on_queued: Callable[[], None] | None = None,
    ) -> None:
        """``use_llm``: automatic decisions go to the 'supersede' job (``on_queued`` wakes its
        worker) instead of the inline rules."""
        self.supersessions = store
        self.settings = settings
        self.use_llm = use_llm
        self.resolver_for = resolver_for
        self.on_queued = on_queued

    async def resolver(self, scope: Scope) -> Resolver:
        """Names to subjects for what ``scope`` (the adder) may know."""
        people = await self.resolver_for(scope) if self.resolver_for is not None else None
        return owner_resolver(scope.user_id, people)

    @staticmethod
    def judge(resolve: Resolver) -> Judge:
        """The offline rules on one pair (``new`` is the later memory)."""

        def rule(old: MemoryRecord, new: MemoryRecord) -> Ruling:
            return ruling_of(decide(statement_of(old), statement_of(new), resolve))

        return rule

    async def store(self, scope: Scope, new: NewMemory, **asked: Unpack[AddOptions]) -> Stored:
        """Store ``new`` for ``scope`` and replace what it supersedes (see the module doc)."""
        plan = await self.plan(new, scope, **asked)
        stored = await self.supersessions.add(scope, new, plan)
        if plan.defer and not stored.deduplicated:
            self.queued()
        return stored

    async def plan(self, new: NewMemory, scope: Scope, **asked: Unpack[AddOptions]) -> Plan:
        """What storing ``new`` for the adder ``scope`` asks beyond the insert; extraction stores
        its facts with these plans inside its own transaction (``store.learned``)."""
        attributes = attribute_keys(new.content)
        # Without an attribute the rules have no candidates: no resolver to build.
        judge = None if self.use_llm or not attributes else self.judge(await self.resolver(scope))
        return Plan(
            attributes=attributes,
            judge=judge,
            defer=self.use_llm,
            max_candidates=self.settings.max_candidates,
            **asked,
        )

    def queued(self) -> None:
        """A 'supersede' job was queued: wake its worker."""
        if self.on_queued is not None:
            self.on_queued()

    async def history(self, scope: Scope, prefix: str) -> list[MemoryRecord] | None:
        return await self.supersessions.history(scope, prefix)
