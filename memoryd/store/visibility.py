"""Who may see which memory: the caller (``Scope``), the scope keys, and the disclosure rules, as data.

Every backend turns these rules into its own filter (SQLite: ``sqlite/visibility_sql.py``,
from which every retriever builds its WHERE clause), so a visibility rule is written once, here.
Superseded memories are hidden unless the caller asks for them (``Scope.include_superseded``).

A memory lives in one scope key: ``u:<owner>`` (personal) or ``c:<chat_id>`` (group).  A caller
sees its own personal key plus the group key of its current chat, nothing else.

Within those keys, ash's disclosure rules decide by where a memory was learned (its ``chat_id``
and ``chat_type``), its ``sensitivity`` and ``conversation_private``, and the caller's chat:

* in a group chat, a memory learned elsewhere is shown only if it was learned in a group chat
  (learned in a private chat, or where is unknown: it stays out);
* a ``sensitive`` memory is shown only in a private chat;
* a conversation-private memory only in the chat where it was learned;
* ``this_chat`` keeps only the memories learned in the current chat.

The memory's side of these rules is one small integer, the generated column
``memories.disclosure`` (see :class:`Disclosure`), also stored in each vec0 row; the caller's
side is the set of codes it may see (:func:`visible_codes`).  So the same sets filter the SQL
rows and, inside the scan, the vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from memoryd.errors import BrokenInvariant

ScopeKind = Literal["personal", "group"]
#: What the caller's chat is, for the disclosure rules.
Audience = Literal["private", "group", "unknown"]

#: ash's chat types with more than two people in them.
GROUP_CHAT_TYPES = ("group", "supergroup")
PRIVATE_CHAT_TYPE = "private"
SENSITIVITIES = ("public", "personal", "sensitive")

PERSONAL_PREFIX = "u:"
GROUP_PREFIX = "c:"


def personal_key(user_id: str) -> str:
    return PERSONAL_PREFIX + user_id


def group_key(chat_id: str) -> str:
    return GROUP_PREFIX + chat_id


def scope_kind(shared: bool) -> ScopeKind:
    """The wire name of a memory's scope."""
    return "group" if shared else "personal"


def kind_of_key(scope_key: str) -> ScopeKind:
    return scope_kind(not scope_key.startswith(PERSONAL_PREFIX))


def key_for(*, shared: bool, owner: str, chat_id: str | None) -> str:
    """The scope key a memory is stored under (a shared memory needs its chat)."""
    if shared:
        if chat_id is None:
            raise BrokenInvariant("a shared (group) memory needs a chat_id")
        return group_key(chat_id)
    return personal_key(owner)


@dataclass(frozen=True, slots=True)
class Scope:
    """Who is asking: a user, optionally inside a chat, and what that chat is.

    The caller sees its own personal memories plus the group memories of ``chat_id``, as far as
    the disclosure rules allow in a chat of ``chat_type`` (ash's routing field: private, group,
    supergroup; None when unknown).  ``this_chat`` keeps only what was learned in ``chat_id``.
    ``verified`` says the identity came from a context token: the host then vouched for the
    chat, so a chat whose type the token leaves out counts as a group (fail closed); a trusted
    caller that sends no chat_type gets no group rule (plain memoryd use, memoryd's own CLI).
    """

    user_id: str
    chat_id: str | None = None
    chat_type: str | None = None
    this_chat: bool = False
    verified: bool = False
    #: Also show memories that a newer one superseded (search and list's ``include_superseded``).
    include_superseded: bool = False

    def __post_init__(self) -> None:
        # An invariant, not input validation (the service checks input): an empty user would
        # be the personal key "u:", which nobody owns.
        if not self.user_id:
            raise BrokenInvariant("a scope needs a user_id")

    @property
    def audience(self) -> Audience:
        """private, group (any other known chat type counts as one: fail closed) or unknown."""
        if self.chat_type == PRIVATE_CHAT_TYPE:
            return "private"
        if self.chat_type is not None or (self.verified and self.chat_id is not None):
            return "group"
        return "unknown"

    def visible_keys(self) -> list[str]:
        """The scope keys (vec0 partition values) this caller may read."""
        keys = [personal_key(self.user_id)]
        if self.chat_id is not None:
            keys.append(group_key(self.chat_id))
        return keys


# -- disclosure ------------------------------------------------------------------------------

#: Where a memory was learned, as far as the rules care.
LEARNED_UNKNOWN, LEARNED_PRIVATE, LEARNED_GROUP = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Disclosure:
    """The memory's side of the disclosure rules; ``code`` packs it into 0..11."""

    learned: int  # LEARNED_UNKNOWN, LEARNED_PRIVATE or LEARNED_GROUP
    sensitive: bool
    conversation_private: bool

    @property
    def code(self) -> int:
        return self.learned + 3 * self.sensitive + 6 * self.conversation_private

    @classmethod
    def of(cls, chat_type: str | None, sensitivity: str | None, conversation_private: bool) -> Disclosure:
        if chat_type in GROUP_CHAT_TYPES:
            learned = LEARNED_GROUP
        elif chat_type == PRIVATE_CHAT_TYPE:
            learned = LEARNED_PRIVATE
        else:  # unknown, or a type ash does not name: never proof of a group
            learned = LEARNED_UNKNOWN
        return cls(learned, sensitivity == "sensitive", bool(conversation_private))


ALL_DISCLOSURES = tuple(
    Disclosure(learned, sensitive, private)
    for private in (False, True)
    for sensitive in (False, True)
    for learned in (LEARNED_UNKNOWN, LEARNED_PRIVATE, LEARNED_GROUP)
)


def shown(audience: Audience, this_chat: bool, memory: Disclosure, *, learned_here: bool) -> bool:
    """THE disclosure rule, for one memory; ``learned_here``: learned in the caller's chat."""
    if memory.sensitive and audience != "private":
        return False
    if learned_here:
        return True
    if this_chat or memory.conversation_private:
        return False
    return audience != "group" or memory.learned == LEARNED_GROUP


def disclosure_of_code(code: int) -> Disclosure:
    """The inverse of :attr:`Disclosure.code`."""
    return Disclosure(code % 3, bool((code // 3) % 2), bool(code // 6))


#: Where a memory lives and how it may be shown: (scope key, chat learned in, disclosure code).
Placement = tuple[str, "str | None", int]


def covers(wide: Placement, narrow: Placement) -> bool:
    """Whether every caller (of the same owner) that may see a memory placed ``narrow`` may also
    see one placed ``wide``: what ``wide`` tells is then no news to anyone who sees ``narrow``.
    People learning asks it before a memory adds a relationship or an alias to a person known
    from other memories (``people_learning``)."""
    wide_key, wide_chat, wide_code = wide
    narrow_key, narrow_chat, narrow_code = narrow
    if not wide_key.startswith(PERSONAL_PREFIX) and wide_key != narrow_key:
        return False  # a group memory is seen in its chat only
    if narrow_key.startswith(PERSONAL_PREFIX):
        chats: tuple[str | None, ...] = (None, narrow_chat, wide_chat, "\x00elsewhere")
    else:
        chats = (narrow_key[len(GROUP_PREFIX) :],)
    w, n = disclosure_of_code(wide_code), disclosure_of_code(narrow_code)
    for chat in chats:
        for audience in _audiences_in(chat, (narrow_chat, n), (wide_chat, w)):
            # ``this_chat`` is a filter the caller chooses, not a boundary: not asked.
            seen_narrow = shown(audience, False, n, learned_here=chat is not None and chat == narrow_chat)
            if seen_narrow and not shown(audience, False, w, learned_here=chat is not None and chat == wide_chat):
                return False
    return True


_AUDIENCE_OF_LEARNED: dict[int, Audience] = {LEARNED_PRIVATE: "private", LEARNED_GROUP: "group"}


def _audiences_in(chat: str | None, *learned_in: tuple[str | None, Disclosure]) -> tuple[Audience, ...]:
    """The audiences a caller in ``chat`` can have: a chat a memory was learned in has the type
    it was learned with (or an unknown one); any other chat, any."""
    possible: set[Audience] = {"private", "group", "unknown"}
    for learned_chat, memory in learned_in:
        if chat is not None and chat == learned_chat and memory.learned in _AUDIENCE_OF_LEARNED:
            possible &= {_AUDIENCE_OF_LEARNED[memory.learned], "unknown"}
    return tuple(sorted(possible))


@cache
def _codes(audience: Audience, this_chat: bool, learned_here: bool) -> tuple[int, ...]:
    return tuple(d.code for d in ALL_DISCLOSURES if shown(audience, this_chat, d, learned_here=learned_here))


def visible_codes(scope: Scope) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(codes shown wherever learned, codes shown when learned in ``scope.chat_id``)."""
    elsewhere = _codes(scope.audience, scope.this_chat, False)
    here = _codes(scope.audience, scope.this_chat, True) if scope.chat_id is not None else ()
    return elsewhere, here


def vector_branches(scope: Scope) -> list[tuple[tuple[int, ...], str | None]]:
    """What each vector filter (one scan each, ``visibility_sql.vector_filters``) admits, besides the unexpired: (disclosure codes,
    the chat the memory must have been learned in, or None), in the same order."""
    elsewhere, here = visible_codes(scope)
    branches: list[tuple[tuple[int, ...], str | None]] = []
    if elsewhere:
        branches.append((elsewhere, None))
    if here:
        branches.append((here, scope.chat_id))
    return branches


def codes_in(column: str, codes: tuple[int, ...]) -> str:
    """``column IN (codes)``: the codes are our own ints, so the SQL is safe as written."""
    return f"{column} IN ({', '.join(str(int(code)) for code in codes)})"


def disclosure_terms(scope: Scope, alias: str, placeholder: str) -> tuple[list[str], tuple[object, ...]] | None:
    """The disclosure rules for ``scope`` as SQL alternatives over table ``alias`` (their OR is
    what it may see), with ``placeholder`` the engine's parameter mark; None when every
    disclosure shows (no clause needed), no alternatives when none does."""
    if len(visible_codes(scope)[0]) == len(ALL_DISCLOSURES):
        return None
    parts: list[str] = []
    params: tuple[object, ...] = ()
    for codes, learned_chat in vector_branches(scope):
        if learned_chat is None:
            parts.append(codes_in(f"{alias}.disclosure", codes))
        else:
            parts.append(f"({alias}.chat_id = {placeholder} AND {codes_in(f'{alias}.disclosure', codes)})")
            params = (learned_chat,)
    return parts, params
