"""memory.summary: a profile of the owner, built from exactly what the caller may see.

Cached per ``Scope`` (user + chat, and whatever else visibility grows to depend on), never per
user alone: a summary asked from chat B is built from the user's personal memories plus chat
B's group memories, so chat A's group memories cannot leak through a cache.

- Offline (no ``[llm]``): a deterministic digest grouped by person and type
  (``summary_digest``), rebuilt on the next call after any change: never stale.
- With an LLM: a narrative, written in the background, never while a caller waits (the first
  call for a scope answers the digest), and rebuilt ``summary.debounce_seconds`` after the
  first change (several adds in a row cost one call); a call in between answers the previous
  text, so it is never staler than the debounce plus one LLM reply.  If the model fails, the
  digest is kept.  A delete (``memory.delete``, ``memory.forget_person``) is different: the
  narrative may quote what went, so it is dropped at once, and so is any narrative the model
  was writing meanwhile; the next call answers a digest built from the store.  So does a
  summary once a memory it was built from expires, or once the maintenance pass evicted
  memories it can see (``lifecycle.max_entries_*``).  On PostgreSQL another daemon's delete or
  eviction arrives as a change notice that says so (``deleted:<key>``) and drops the summaries
  as a local delete does; another daemon's add only leaves them stale, like a local one.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from memoryd.auth import Authenticator
from memoryd.config import SummaryConfig
from memoryd.errors import LlmError
from memoryd.ids import iso_from_ms, ms_from_iso, now_ms
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd.service.erasure_watch import ErasureWatch
from memoryd.service.people_params import SummaryParams
from memoryd.service.provenance import caller_scope
from memoryd.service.summary_digest import digest, facts_for_llm
from memoryd.store import MemoryRecord, PeopleStore, Scope
from memoryd.store.erasure_log import Erased

if TYPE_CHECKING:
    # Annotations only: the clients import httpx, which a daemon without an LLM never loads.
    from memoryd.llm import LlmClient

log = logging.getLogger("memoryd.service")

#: Summaries kept at once (one per user and chat asked from); the oldest asked goes first.
CACHE_SCOPES = 1024

SUMMARY_SYSTEM_PROMPT = """You write a short profile of a user for an AI assistant's system prompt.
You get facts the assistant remembers about the user and the people in their life.
Write 3 to 6 plain sentences in the third person ("The user ..."): who they are, what they like,
the people in their life (with the relationship), and anything they are working on.
Use only the facts given; never invent. Prefer newer facts when two disagree.
Answer JSON: {"summary": "..."}"""


class SummaryReply(msgspec.Struct):
    summary: str


@dataclass
class _Entry:
    text: str
    source: str  # "llm" or "digest"
    built_at_ms: int
    memories: int
    dirty_since: float | None = None  # trio time of the first change not in ``text``
    #: When the first memory it was built from expires (ms): then it may quote what is no
    #: longer live, and goes like after a delete.
    expires_at_ms: int | None = None


@dataclass(eq=False)
class _Build:
    """A summary being built, and what changed under it meanwhile."""

    scope: Scope
    #: trio time of the first add it may have missed: cached as stale since then.
    overtaken: float | None = None
    #: A delete or an erasure it may quote: answered to its caller, cached for none.
    spoiled: bool = False


class SummaryService:
    def __init__(
        self,
        people: PeopleStore,
        authenticator: Authenticator,
        llm: LlmClient | None,
        settings: SummaryConfig,
    ) -> None:
        self.people = people
        self.authenticator = authenticator
        self.llm = llm
        self.settings = settings
        self._cache: OrderedDict[Scope, _Entry] = OrderedDict()
        #: Builds under way: one that a delete or an erasure overtook is not cached (its text
        #: may quote what went); one that an add overtook is cached as stale since that add.
        self._builds: list[_Build] = []
        #: Erasures by other processes, checked before a cached summary is answered.
        self.erasure_watch: ErasureWatch | None = None
        self._wake = trio.Event()
        self.rebuilt = 0  # background rebuilds done (tests wait on it)

    # -- freshness: the memory service tells us about changes ---------------------------------

    async def note_added(self, scope: Scope, record: MemoryRecord, owner_names: tuple[str, ...]) -> None:
        """An ``AddedListener``: summaries that can see the new memory are out of date."""
        shared = record.scope == "group"
        self._mark(lambda s: (record.chat_id == s.chat_id) if shared else s.user_id == record.owner)

    def note_deleted(self, scope: Scope) -> None:
        """A ``DeletedListener``: summaries seeing any of the caller's keys may quote what was
        deleted, so they go now (the next call answers a digest built from the store, and has
        the narrative rewritten), and so does every build under way for them."""
        keys = set(scope.visible_keys())
        self._drop(lambda seen_by: bool(keys & set(seen_by.visible_keys())))

    def note_deleted_key(self, scope_key: str) -> None:
        """Memories under ``scope_key`` were deleted or evicted (by this daemon's maintenance,
        or by any process on a PostgreSQL store, which says so in its change notice): the
        summaries that see that key go, as after a local delete."""
        self._drop(lambda seen_by: scope_key in seen_by.visible_keys())

    def _drop(self, affected: Callable[[Scope], bool]) -> None:
        for cached in [cached for cached in self._cache if affected(cached)]:
            del self._cache[cached]
        for build in self._builds:
            build.spoiled = build.spoiled or affected(build.scope)

    def forget_user(self, user_id: str) -> None:
        """The user's data was erased: their cached summaries go now, not at the next rebuild."""
        self.forget_erased(lambda erased: erased == user_id)

    def forget_erased(self, erased: Erased) -> None:
        """Users were erased by another process (``ErasureWatch``): their summaries go, and no
        build under way is kept (its material may hold them)."""
        self._spoil_builds()
        for scope in [scope for scope in self._cache if erased(scope.user_id)]:
            del self._cache[scope]

    def forget_group_chats(self) -> None:
        """An erasure deleted group memories: every cached summary of a chat goes, since other
        members' summaries of the erased user's chats were built from them.  The erasure does
        not say which chats (the SQLite log names none); erasures are rare, and a dropped
        summary is rebuilt from the store on next use."""
        self._spoil_builds()
        for scope in [scope for scope in self._cache if scope.chat_id is not None]:
            del self._cache[scope]

    def note_changed_key(self, scope_key: str) -> None:
        """Another process (a daemon sharing the store) changed memories under ``scope_key``:
        summaries that see that key are out of date."""
        self._mark(lambda s: scope_key in s.visible_keys())

    def _mark(self, affected: Any) -> None:
        now = trio.current_time()
        for scope, entry in self._cache.items():
            if entry.dirty_since is None and affected(scope):
                entry.dirty_since = now
        for build in self._builds:
            if build.overtaken is None and affected(build.scope):
                build.overtaken = now
        self._wake.set()

    def _spoil_builds(self) -> None:
        for build in self._builds:
            build.spoiled = True

    # -- the method ----------------------------------------------------------------------------

    async def summary(self, params: SummaryParams, ctx: CallContext) -> dict[str, Any]:
        return await self.summary_for(caller_scope(params, ctx, self.authenticator))

    async def summary_for(self, scope: Scope) -> dict[str, Any]:
        """Never waits for the LLM (memory.context calls this before every reply): the first
        call for a scope answers the digest and has the narrative written in the background."""
        if self.erasure_watch is not None:
            await self.erasure_watch.check()
        entry = self._cache.get(scope)
        if entry is not None and entry.expires_at_ms is not None and entry.expires_at_ms <= now_ms():
            del self._cache[scope]
            entry = None
        if entry is None or (entry.dirty_since is not None and self.llm is None):
            entry = await self._build(scope, use_llm=False)
            if self.llm is not None and entry.memories:
                entry.dirty_since = trio.current_time() - self.settings.debounce_seconds  # due now
                self._wake.set()
        if scope in self._cache:
            self._cache.move_to_end(scope)
        return {
            "summary": entry.text,
            "source": entry.source,
            "generated_at": iso_from_ms(entry.built_at_ms),
            "memories": entry.memories,
            "stale": entry.dirty_since is not None,
        }

    async def _build(self, scope: Scope, *, use_llm: bool) -> _Entry:
        """Build the scope's summary and cache it, unless what it was built from changed under
        it: an erasure or a delete (the text may quote what went; the cached entry went with
        it, so the next call builds anew from the store).  An add only leaves it stale."""
        build = _Build(scope)
        self._builds.append(build)
        try:
            entry = await self._write(scope, use_llm=use_llm)
        finally:
            self._builds.remove(build)
        if build.spoiled:
            return entry  # read before the delete or erasure: answered to this caller, kept for none
        entry.dirty_since = build.overtaken  # changed again while we were building
        self._cache[scope] = entry
        while len(self._cache) > CACHE_SCOPES:
            self._cache.popitem(last=False)
        return entry

    async def _write(self, scope: Scope, *, use_llm: bool) -> _Entry:
        material = await self.people.summary_material(scope, self.settings.max_memories)
        text, source = digest(material, self.settings.max_chars), "digest"
        if use_llm and self.llm is not None and material.records:
            try:
                reply = await self.llm.complete_json(
                    SUMMARY_SYSTEM_PROMPT, [{"role": "user", "content": facts_for_llm(material)}], SummaryReply
                )
                if reply.summary.strip():
                    text, source = reply.summary.strip()[: self.settings.max_chars], "llm"
            except LlmError as exc:
                log.warning("summary.digest_instead", extra=fields(reason=type(exc).__name__))
        expiries = [ms_from_iso(record.expires_at) for record in material.records if record.expires_at is not None]
        return _Entry(text, source, now_ms(), len(material.records), expires_at_ms=min(expiries, default=None))

    # -- the background rebuilder (LLM only) ---------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.llm is None:
            return  # offline the digest is rebuilt on demand
        while True:
            due = [
                (e.dirty_since + self.settings.debounce_seconds, s)
                for s, e in self._cache.items()
                if e.dirty_since is not None
            ]
            if not due:
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            when, scope = min(due, key=lambda item: item[0])
            if when > trio.current_time():
                with trio.move_on_at(when):
                    await self._wake.wait()
                    self._wake = trio.Event()
                continue
            try:
                await self._build(scope, use_llm=True)
            except Exception:  # the next change or call retries; the daemon must not stop
                log.warning("summary.rebuild_failed", exc_info=True)
                entry = self._cache.get(scope)
                if entry is not None:
                    entry.dirty_since = trio.current_time()
            self.rebuilt += 1
