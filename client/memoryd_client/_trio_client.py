"""The trio client: the same calls as ``MemoryClient``, awaitable.

Imported lazily by ``memoryd_client.AsyncMemoryClient`` so that the blocking client works where
trio is not installed.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, cast

import trio

from . import _methods
from ._base import RECV_BYTES, Broken, ClientBase
from ._connect import ConnectRetry, describe_connect_error, unix_socket
from ._methods import Record, Records
from ._protocol import LineReader, Response, outcome, parse_response


class AsyncMemoryClient(ClientBase):
    """trio memoryd client; one call at a time per client (calls from several tasks queue up).

    Same identity, reconnect and timeout rules as ``MemoryClient``.  Use ``async with`` or
    ``await aclose()``.
    """

    def _setup_io(self) -> None:
        self._lock = trio.Lock()
        self._stream: Optional[trio.SocketStream] = None

    # -- typed methods ------------------------------------------------------------------
    # Twins of the other client's, on purpose: one blocking, one awaitable (see _base.py).

    async def add(
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
        params = _methods.add_params(content, source, expires_days, subjects, shared, supersedes, key, sensitivity)
        return cast(Record, await self.call("memory.add", **params))

    async def search(
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
        params = _methods.search_params(query, limit, about, include_superseded, this_chat, min_relevance, types)
        return cast(Records, await self.call("memory.search", **params))

    async def list(
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
        params = _methods.list_params(
            limit, offset, before_id, include_expired, about, include_superseded, this_chat, types
        )
        return cast(Records, await self.call("memory.list", **params))

    async def get(self, memory_id: str) -> Record:
        """One memory by full id or unique prefix (>= 8 chars); raises NotFound if none is visible."""
        return cast(Record, await self.call("memory.get", **_methods.memory_id_params(memory_id)))

    async def history(self, memory_id: str) -> Records:
        """The versions of a memory (what it replaced, what replaced it), oldest first."""
        return cast(Records, await self.call("memory.history", **_methods.memory_id_params(memory_id)))

    async def delete(self, memory_id: str) -> Record:
        return cast(Record, await self.call("memory.delete", **_methods.memory_id_params(memory_id)))

    async def forget_all(self, *, include_group: bool = False) -> Record:
        """Erase everything stored about the caller, at once: ``{"erased": {kind: count}, ...}``.
        ``include_group`` also deletes the group memories the caller added."""
        return cast(Record, await self.call("memory.forget_all", confirm=True, include_group=include_group))

    async def pin(self, memory_id: str) -> Record:
        """Keep a memory for good (never evicted or expired): the pinned record."""
        return cast(Record, await self.call("memory.pin", **_methods.memory_id_params(memory_id)))

    async def unpin(self, memory_id: str) -> Record:
        """Make a pinned memory evictable again: the record."""
        return cast(Record, await self.call("memory.unpin", **_methods.memory_id_params(memory_id)))

    async def observe(self, messages: Sequence[Record], *, session_key: Optional[str] = None) -> Record:
        """Post conversation messages (``{"role", "content", "id"?, "timestamp"?, "username"?, ...}``)
        for background extraction: ``{"accepted": n}``, answered at once."""
        return cast(Record, await self.call("memory.observe", **_methods.observe_params(messages, session_key)))

    async def extract(
        self, message_id: str, *, session_key: Optional[str] = None, timeout: Optional[float] = _methods.EXTRACT_TIMEOUT
    ) -> Record:
        """Extract now from the observed session around ``message_id``: ``{"stored", "ids"}``, or
        ``{"stored": 0, "error": "Message not found in session"}``; LlmNotConfigured without an LLM.
        ``timeout``: seconds to wait for the daemon's answer (None: no limit), longer than the
        client's own by default since the daemon waits on its LLM."""
        return cast(
            Record, await self._call("memory.extract", _methods.extract_params(message_id, session_key), timeout)
        )

    async def extract_from_messages(
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
        return cast(Record, await self._call("memory.extract_from_messages", params, timeout))

    async def health(self) -> Record:
        return cast(Record, await self.call("system.health"))

    # -- people, context, summary (see MemoryClient) ----------------------------------------

    async def context(
        self,
        message: str,
        limit: Optional[int] = None,
        max_chars: Optional[int] = None,
        min_relevance: Optional[float] = None,
        include_summary: Optional[bool] = None,
    ) -> Record:
        params = _methods.context_params(message, limit, max_chars, min_relevance, include_summary)
        return cast(Record, await self.call("memory.context", **params))

    async def summary(self) -> Record:
        return cast(Record, await self.call("memory.summary"))

    async def people(self) -> Records:
        return cast(Records, await self.call("person.list"))

    async def person(self, name: str, limit: Optional[int] = None) -> Record:
        return cast(Record, await self.call("person.get", **_methods.person_params(name, limit)))

    async def merge_people(self, from_: str, into: str) -> Record:
        return cast(Record, await self.call("person.merge", **_methods.merge_params(from_, into)))

    async def add_alias(self, name: str, alias: str) -> Record:
        return cast(Record, await self.call("person.alias", name=name, alias=alias))

    async def forget_person(self, person: str, delete_person_record: bool = True) -> Record:
        params = _methods.forget_person_params(person, delete_person_record)
        return cast(Record, await self.call("memory.forget_person", **params))

    # -- the wire -------------------------------------------------------------------------

    async def call(self, method: str, /, **params: Any) -> Any:
        """Call any method; identity parameters are added unless ``params`` names them."""
        return await self._call(method, params, self.timeout)

    async def _call(self, method: str, params: Dict[str, Any], timeout: Optional[float]) -> Any:
        async with self._lock:
            request_id, payload = self._request(method, params)
            deadline = trio.current_time() + timeout if timeout is not None else float("inf")
            with trio.CancelScope(deadline=deadline) as scope:
                try:
                    try:
                        response = await self._exchange(payload)
                    except Broken:
                        # Typically the daemon restarted since our last call: resend once.
                        await self._drop()
                        response = await self._exchange(payload)
                except Broken as exc:
                    await self._drop()
                    raise self._broke_twice(method) from exc
                except BaseException:
                    # Timed out or cancelled with a reply in flight: never read it as the
                    # answer to a later call.
                    await self._drop()
                    raise
            if scope.cancelled_caught:
                raise self._timed_out(timeout)
            if response.id != request_id:
                await self._drop()
            return outcome(response, request_id, len(payload))

    async def _exchange(self, payload: bytes) -> Response:
        stream = await self._connection()
        try:
            try:
                await stream.send_all(payload)
            except (trio.BrokenResourceError, OSError):
                # Keep reading: the daemon may have answered before hanging up (an oversized
                # request gets PayloadTooLarge, then the close).  A dead connection reads EOF.
                pass
            while True:
                line = self._reader.next_line()
                if line is not None:
                    return parse_response(line)
                data = await stream.receive_some(RECV_BYTES)
                if not data:
                    raise Broken("EOF before the reply")
                self._reader.feed(data)
        except (trio.BrokenResourceError, OSError) as exc:
            raise Broken(str(exc)) from exc

    async def _connection(self) -> trio.SocketStream:
        if self._stream is None:
            self._stream = await self._connect()
            self._reader = LineReader()
        return self._stream

    async def _connect(self) -> trio.SocketStream:
        # Not trio.open_unix_socket: it takes an AF_UNIX EAGAIN (accept queue full) for a
        # connect in progress and hands back a socket that was never connected.  An AF_UNIX
        # connect is never in progress: it succeeds or fails at once.
        retry = ConnectRetry(trio.current_time())
        deadline = trio.current_effective_deadline()
        while True:
            sock = unix_socket()
            sock.setblocking(False)
            try:
                sock.connect(self._socket_path)
                return trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            except OSError as exc:
                sock.close()
                now = trio.current_time()
                delay = retry.next_delay(exc, now, None if deadline == float("inf") else deadline)
                if delay is None:
                    raise self._unavailable(describe_connect_error(exc)) from exc
            await trio.sleep(delay)

    async def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            # Shielded: dropping must finish even while the call is being cancelled.
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
