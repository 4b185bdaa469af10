"""Per-user bounds on memory.observe, so one user's flood of messages or sessions cannot fill the
disk or the LLM's queue for everyone (``[limits]``: observe_messages_per_minute,
observe_bytes_per_minute, max_observed_sessions_per_user, max_queued_extractions_per_user).

Each refusal is -32003 Overloaded whose data names the ``limit`` and says in ``retry_after``
(seconds) when the same call would be accepted; nothing of a refused call is stored.  The rates
and the sessions are counted in this process (a restart forgets them, which a client cannot
cause; each daemon on a shared PostgreSQL database counts its own); the queued extractions,
which bound LLM requests, are read from the store at each call.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from memoryd.errors import InvalidParams, Overloaded

#: The rates' window, and how long a session counts as open after its last message.
RATE_WINDOW_SECONDS = 60.0
SESSION_WINDOW_SECONDS = 3600.0
#: Users tracked before the quiet ones are forgotten.
PRUNE_AT_USERS = 10_000


@dataclass(frozen=True)
class ObserveLimits:
    messages_per_minute: int
    bytes_per_minute: int
    #: Distinct sessions one user may have observed into within the last hour.
    sessions: int
    #: Sessions of one user waiting for extraction (with an LLM configured).
    queued_extractions: int


def over_limit(limit: str, retry_after: float, reason: str) -> Overloaded:
    return Overloaded(
        f"Overloaded, retry later: {reason}",
        {"limit": limit, "retry_after": round(max(retry_after, 0.1), 1), "reason": reason},
    )


class _User:
    __slots__ = ("calls", "messages", "bytes", "sessions")

    def __init__(self) -> None:
        self.calls: deque[tuple[float, int, int]] = deque()  # (when, messages, bytes)
        self.messages = 0
        self.bytes = 0
        self.sessions: dict[str, float] = {}  # session key -> last observed (oldest first)


class ObserveQuota:
    def __init__(self, limits: ObserveLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._users: dict[str, _User] = {}
        #: Refusals since start, by limit (system.health).
        self.refused: dict[str, int] = {}

    def admit(self, user: str, session: str, messages: int, size: int) -> None:
        """Count one observe call, or raise Overloaded (counting nothing) when it is past a
        bound."""
        now = self._clock()
        state = self._users.get(user)
        if state is None:
            if len(self._users) >= PRUNE_AT_USERS:
                self._forget_quiet(now)
            state = self._users[user] = _User()
        self._expire(state, now)
        limits = self.limits
        if messages > limits.messages_per_minute or size > limits.bytes_per_minute:
            raise InvalidParams.for_field(
                "messages",
                "hold more than one minute's worth (limits.observe_messages_per_minute / observe_bytes_per_minute)",
            )
        if state.messages + messages > limits.messages_per_minute:
            self._refuse(
                "observe_messages_per_minute", self._wait(state, now, messages, 1), "too many messages this minute"
            )
        if state.bytes + size > limits.bytes_per_minute:
            self._refuse("observe_bytes_per_minute", self._wait(state, now, size, 2), "too many bytes this minute")
        if session not in state.sessions and len(state.sessions) >= limits.sessions:
            oldest = next(iter(state.sessions.values()))
            self._refuse(
                "max_observed_sessions_per_user", oldest + SESSION_WINDOW_SECONDS - now, "too many sessions this hour"
            )
        state.calls.append((now, messages, size))
        state.messages += messages
        state.bytes += size
        state.sessions.pop(session, None)
        state.sessions[session] = now

    def _forget_quiet(self, now: float) -> None:
        """Drop the users with nothing left in either window (their state is empty anyway)."""
        for user, state in list(self._users.items()):
            self._expire(state, now)
            if not state.calls and not state.sessions:
                del self._users[user]

    def refuse_queue(self, retry_after: float) -> None:
        self._refuse("max_queued_extractions_per_user", retry_after, "too many sessions waiting for extraction")

    def _refuse(self, limit: str, retry_after: float, reason: str) -> None:
        self.refused[limit] = self.refused.get(limit, 0) + 1
        raise over_limit(limit, retry_after, reason)

    def _expire(self, state: _User, now: float) -> None:
        while state.calls and state.calls[0][0] <= now - RATE_WINDOW_SECONDS:
            _, messages, size = state.calls.popleft()
            state.messages -= messages
            state.bytes -= size
        while state.sessions:
            key, seen = next(iter(state.sessions.items()))
            if seen > now - SESSION_WINDOW_SECONDS:
                break
            del state.sessions[key]

    def _wait(self, state: _User, now: float, wanted: int, column: int) -> float:
        """Seconds until enough of the window has expired for ``wanted`` more."""
        limit = self.limits.messages_per_minute if column == 1 else self.limits.bytes_per_minute
        used = state.messages if column == 1 else state.bytes
        for when, *amounts in state.calls:
            used -= amounts[column - 1]
            if used + wanted <= limit:
                return when + RATE_WINDOW_SECONDS - now
        return RATE_WINDOW_SECONDS
