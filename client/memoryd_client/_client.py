"""The blocking client: one persistent NDJSON connection, one call at a time, thread-safe."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Dict, Optional, Sequence, cast

from . import _methods
from ._base import RECV_BYTES, Broken, ClientBase
from ._connect import ConnectRetry, describe_connect_error, unix_socket
from ._methods import Record, Records
from ._protocol import LineReader, Response, outcome, parse_response
from .errors import RequestTimeout


class MemoryClient(ClientBase):
    """Blocking memoryd client.

    Identity and socket come from the arguments, else the environment (see the README).  The
    connection opens on the first call and is reused; if the daemon restarted in between, the
    call reconnects once and resends (``memory.add`` is deduplicated by the daemon, so a resend
    cannot store twice).  ``close()`` drops the connection; a later call opens a new one.
    """

    def _setup_io(self) -> None:
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._owner_pid = os.getpid()

    # -- typed methods ------------------------------------------------------------------
    # Twins of the other client's, on purpose: one blocking, one awaitable (see _base.py).

    def add(
        self,
        content: str,
        *,
        source: Optional[str] = None,
        expires_days: Optional[float] = None,
        subjects: Optional[Sequence[str]] = None,
        shared: bool = False,
        supersedes: Optional[str] = None,
        key: Optional[str] = None,
        sensitivity: Optional[str] = None,
    ) -> Record:
        """Store a memory: ``{"id", "short_id", "created_at", "scope", "deduplicated", "embedded",
        "superseded"}``; ``supersedes`` (an id) or ``key`` (an upsert key) replace older memories."""
        params = _methods.add_params(content, source, expires_days, subjects, shared, supersedes, key, sensitivity)
        return cast(Record, self.call("memory.add", **params))

    def search(
        self,
        query: str,
        limit: int = 10,
        about: Optional[str] = None,
        *,
        include_superseded: bool = False,
        this_chat: bool = False,
        min_relevance: Optional[float] = None,
        types: Optional[Sequence[str]] = None,
    ) -> Records:
        """Best hits first, each with ``score``, ``relevance``, ``similarity`` and ``about``;
        ``about`` (a name, alias or "my wife") keeps only the memories about that person;
        ``include_superseded`` also returns memories a newer one replaced; ``this_chat`` keeps
        only the memories learned in the client's chat; ``min_relevance`` (0..1, the estimated
        probability that a memory helps) leaves out the hits below it (the daemon's default
        floor drops only clearly unrelated ones); ``types`` keeps only those memory types
        (``["episode"]``: observed messages only)."""
        params = _methods.search_params(query, limit, about, include_superseded, this_chat, min_relevance, types)
        return cast(Records, self.call("memory.search", **params))

    def list(
        self,
        limit: int = 20,
        offset: int = 0,
        before_id: Optional[str] = None,
        include_expired: bool = False,
        about: Optional[str] = None,
        include_superseded: bool = False,
        this_chat: bool = False,
        *,
        types: Optional[Sequence[str]] = None,
    ) -> Records:
        """Newest first; pass the last id as ``before_id`` for the next page.  Episodes are
        left out unless ``types`` asks for them (``types=["episode"]``)."""
        params = _methods.list_params(
            limit, offset, before_id, include_expired, about, include_superseded, this_chat, types
        )
        return cast(Records, self.call("memory.list", **params))

    def get(self, memory_id: str) -> Record:
        """One memory by full id or unique prefix (>= 8 chars); raises NotFound if none is visible."""
        return cast(Record, self.call("memory.get", **_methods.memory_id_params(memory_id)))

    def history(self, memory_id: str) -> Records:
        """The versions of a memory (what it replaced, what replaced it), oldest first."""
        return cast(Records, self.call("memory.history", **_methods.memory_id_params(memory_id)))

    def delete(self, memory_id: str) -> Record:
        """``{"deleted": bool, "id": str | None}``; ``memory_id`` may be a unique prefix (>= 8 chars)."""
        return cast(Record, self.call("memory.delete", **_methods.memory_id_params(memory_id)))

    def forget_all(self, *, include_group: bool = False) -> Record:
        """Erase everything stored about the caller, at once: ``{"erased": {kind: count}, ...}``.
        ``include_group`` also deletes the group memories the caller added."""
        return cast(Record, self.call("memory.forget_all", confirm=True, include_group=include_group))

    def pin(self, memory_id: str) -> Record:
        """Keep a memory for good (never evicted or expired): the pinned record."""
        return cast(Record, self.call("memory.pin", **_methods.memory_id_params(memory_id)))

    def unpin(self, memory_id: str) -> Record:
        """Make a pinned memory evictable again: the record."""
        return cast(Record, self.call("memory.unpin", **_methods.memory_id_params(memory_id)))

    def observe(self, messages: Sequence[Record], *, session_key: Optional[str] = None) -> Record:
        """Post conversation messages (``{"role", "content", "id"?, "timestamp"?, "username"?, ...}``)
        for background extraction: ``{"accepted": n}``, answered at once."""
        return cast(Record, self.call("memory.observe", **_methods.observe_params(messages, session_key)))

    def extract(
        self, message_id: str, *, session_key: Optional[str] = None, timeout: Optional[float] = _methods.EXTRACT_TIMEOUT
    ) -> Record:
        """Extract now from the observed session around ``message_id``: ``{"stored", "ids"}``, or
        ``{"stored": 0, "error": "Message not found in session"}``; LlmNotConfigured without an LLM.
        ``timeout``: seconds to wait for the daemon's answer (None: no limit), longer than the
        client's own by default since the daemon waits on its LLM."""
        return cast(Record, self._call("memory.extract", _methods.extract_params(message_id, session_key), timeout))

    def extract_from_messages(
        self,
        messages: Sequence[Record],
        *,
        message_id: Optional[str] = None,
        shared: bool = False,
        source_username: Optional[str] = None,
        source_display_name: Optional[str] = None,
        chat_type: Optional[str] = None,
        timeout: Optional[float] = _methods.EXTRACT_TIMEOUT,
    ) -> Record:
        """Extract now from ``messages`` and store the facts: ``{"stored", "ids", "refreshed"}``.
        ``timeout`` as for :meth:`extract`."""
        params = _methods.extract_from_messages_params(
            messages, message_id, shared, source_username, source_display_name, chat_type
        )
        return cast(Record, self._call("memory.extract_from_messages", params, timeout))

    def health(self) -> Record:
        return cast(Record, self.call("system.health"))

    # -- people, context, summary ----------------------------------------------------------

    def context(
        self,
        message: str,
        limit: Optional[int] = None,
        max_chars: Optional[int] = None,
        min_relevance: Optional[float] = None,
        include_summary: Optional[bool] = None,
    ) -> Record:
        """Before a reply: ``{"memories", "people", "summary", "text"}``; ``text`` fits ``max_chars``;
        memories are injected only when the best reaches ``min_relevance`` (default: the daemon's
        ``[context] min_relevance``), then those reaching a share of the best one's relevance.
        ``include_summary=False`` leaves the owner's summary out (default: the daemon's
        ``[context] include_summary``)."""
        params = _methods.context_params(message, limit, max_chars, min_relevance, include_summary)
        return cast(Record, self.call("memory.context", **params))

    def summary(self) -> Record:
        """``{"summary", "source": "llm" | "digest", "generated_at", "memories", "stale"}``."""
        return cast(Record, self.call("memory.summary"))

    def people(self) -> Records:
        """Your people: ``id``, ``name``, ``aliases``, ``relationship``, ``memories`` (a count)."""
        return cast(Records, self.call("person.list"))

    def person(self, name: str, limit: Optional[int] = None) -> Record:
        """A person by name, alias, relationship or id, with the ``memories`` about them."""
        return cast(Record, self.call("person.get", **_methods.person_params(name, limit)))

    def merge_people(self, from_: str, into: str) -> Record:
        return cast(Record, self.call("person.merge", **_methods.merge_params(from_, into)))

    def add_alias(self, name: str, alias: str) -> Record:
        return cast(Record, self.call("person.alias", name=name, alias=alias))

    def forget_person(self, person: str, delete_person_record: bool = True) -> Record:
        """Delete the memories about ``person`` you can see (and the person): ``{"deleted": [ids], ...}``."""
        params = _methods.forget_person_params(person, delete_person_record)
        return cast(Record, self.call("memory.forget_person", **params))

    # -- the wire -------------------------------------------------------------------------

    def call(self, method: str, /, **params: Any) -> Any:
        """Call any method; identity parameters are added unless ``params`` names them."""
        return self._call(method, params, self.timeout)

    def _call(self, method: str, params: Dict[str, Any], timeout: Optional[float]) -> Any:
        with self._lock:
            request_id, payload = self._request(method, params)
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                try:
                    response = self._exchange(payload, deadline, timeout)
                except Broken:
                    # Typically the daemon restarted since our last call: resend once.
                    self._drop()
                    response = self._exchange(payload, deadline, timeout)
            except Broken as exc:
                self._drop()
                raise self._broke_twice(method) from exc
            except BaseException:
                # A timeout or an interrupt leaves a reply in flight: never read it as the
                # answer to a later call.
                self._drop()
                raise
            if response.id != request_id:
                self._drop()
            return outcome(response, request_id, len(payload))

    def _exchange(self, payload: bytes, deadline: Optional[float], timeout: Optional[float]) -> Response:
        sock = self._connection(deadline)
        try:
            sock.settimeout(_remaining(deadline))
            try:
                sock.sendall(payload)
            except socket.timeout:
                raise
            except OSError:
                # Keep reading: the daemon may have answered before hanging up (an oversized
                # request gets PayloadTooLarge, then the close).  A dead connection reads EOF.
                pass
            while True:
                line = self._reader.next_line()
                if line is not None:
                    return parse_response(line)
                sock.settimeout(_remaining(deadline))
                data = sock.recv(RECV_BYTES)
                if not data:
                    raise Broken("EOF before the reply")
                self._reader.feed(data)
        except socket.timeout as exc:
            raise self._timed_out(timeout) from exc
        except OSError as exc:
            raise Broken(str(exc)) from exc

    def _connection(self, deadline: Optional[float]) -> socket.socket:
        if self._owner_pid != os.getpid():
            # A forked child must not talk on its parent's connection: closing the inherited
            # descriptor leaves the parent's open.
            self._drop()
            self._owner_pid = os.getpid()
        if self._sock is not None:
            return self._sock
        self._sock = sock = self._connect(deadline)
        self._reader = LineReader()
        return sock

    def _connect(self, deadline: Optional[float]) -> socket.socket:
        retry = ConnectRetry(time.monotonic())
        while True:
            sock = unix_socket()
            try:
                sock.settimeout(_remaining(deadline))
                sock.connect(self._socket_path)
                return sock
            except socket.timeout as exc:
                sock.close()
                raise RequestTimeout(f"connecting to memoryd at {self._socket_path} timed out") from exc
            except OSError as exc:
                sock.close()
                delay = retry.next_delay(exc, time.monotonic(), deadline)
                if delay is None:
                    raise self._unavailable(describe_connect_error(exc)) from exc
            time.sleep(delay)

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _remaining(deadline: Optional[float]) -> Optional[float]:
    if deadline is None:
        return None
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise socket.timeout("deadline passed")
    return remaining
