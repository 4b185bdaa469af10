"""What the blocking and the trio client share: where to connect, who calls, request ids, and
the errors a broken, slow or absent daemon turns into.

The two clients' typed methods and their I/O stay twins on purpose (one blocking, one
awaitable): Python cannot share a body between ``def`` and ``async def``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ._connect import check_timeout
from ._identity import Identity, resolve_identity
from ._protocol import LineReader, encode_request
from .errors import ConnectionLost, DaemonUnavailable, MissingIdentity, RequestTimeout
from .paths import resolve_socket_path_with_origin

RECV_BYTES = 65536
#: Methods a caller without an identity may still call.
IDENTITY_FREE_METHODS = frozenset({"system.health"})


class Broken(Exception):
    """The connection died under a call (EPIPE, ECONNRESET, EOF before the reply)."""


class ClientBase:
    def __init__(
        self,
        socket_path: Optional[str] = None,
        user_id: Optional[str] = None,
        chat_id: Optional[str] = None,
        context_token: Optional[str] = None,
        timeout: Optional[float] = 10.0,
        chat_type: Optional[str] = None,
    ) -> None:
        self._socket_path, self._socket_origin = resolve_socket_path_with_origin(socket_path)
        self._identity: Identity = resolve_identity(user_id, chat_id, context_token, chat_type=chat_type)
        self.timeout = check_timeout(timeout)
        self._reader = LineReader()
        self._next_id = 1
        self._setup_io()

    def _setup_io(self) -> None:
        """The connection state of one kind of client (its lock, its socket or stream)."""
        raise NotImplementedError

    @property
    def socket_path(self) -> str:
        return self._socket_path

    @property
    def user_id(self) -> Optional[str]:
        return self._identity.user_id

    @property
    def chat_id(self) -> Optional[str]:
        return self._identity.chat_id

    def _request(self, method: str, params: Dict[str, Any]) -> Tuple[int, bytes]:
        """The next request id and the encoded request; identity parameters are added unless
        ``params`` names them.  Call it holding the client's lock (ids must not repeat)."""
        try:
            identity = self._identity.params()
        except MissingIdentity:
            # Liveness needs no user: the daemon answers system.health without resolving one.
            if method not in IDENTITY_FREE_METHODS:
                raise
            identity = {}
        request_id = self._next_id
        self._next_id += 1
        return request_id, encode_request(request_id, method, {**identity, **params})

    def _broke_twice(self, method: str) -> ConnectionLost:
        return ConnectionLost(f"connection to memoryd at {self._socket_path} broke twice during {method}")

    def _timed_out(self, timeout: Optional[float]) -> RequestTimeout:
        return RequestTimeout(f"memoryd at {self._socket_path} did not answer within {timeout} s")

    def _unavailable(self, reason: str) -> DaemonUnavailable:
        return DaemonUnavailable(self._socket_path, self._socket_origin, reason)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(socket_path={self._socket_path!r}, user_id={self.user_id!r}, "
            f"chat_id={self.chat_id!r})"
        )
