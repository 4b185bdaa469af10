"""Who a call acts as: the one place memoryd decides a caller's identity.

trust mode believes the ``user_id``/``chat_id`` a caller sends (right for a socket only its
owner can open).  token mode believes only a verified context token, except from peers whose
uid (SO_PEERCRED, which the kernel vouches for) is listed in ``auth.trusted_uids``.

The routing facts the disclosure rules and provenance depend on (``chat_type``, the speaker,
the message) follow the identity: sent params in trust mode, the token's claims in token mode.
There a param that contradicts a claim is refused like a foreign ``user_id``, and a param
without a claim is ignored (as ash ignores it): a sandbox in a group chat cannot call itself
private.

User and chat ids follow one identifier rule (``memoryd_client.identifiers``) in both modes: a
sent id that breaks it is refused with -32602 naming the field, a token whose ``sub`` or
``chat_id`` breaks it with -32002 (the token is the bad field).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Literal, NoReturn

from memoryd.auth.tokens import DEFAULT_LEEWAY_SECONDS, TokenError, load_token_secret, verify_token
from memoryd.config import AuthConfig
from memoryd.errors import InvalidParams, Unauthorized
from memoryd.log import fields
from memoryd.rpc.dispatch import CallContext
from memoryd_client.identifiers import identifier_problem

log = logging.getLogger("memoryd.auth")

AuthMode = Literal["trust", "token"]


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a call comes from and who spoke, in ash's routing field names (None: unknown)."""

    chat_type: str | None = None
    source_username: str | None = None
    source_display_name: str | None = None
    message_id: str | None = None


NO_ROUTING = Routing()


@dataclass(frozen=True, slots=True)
class Caller:
    """The identity a call acts as; ``verified`` when it came from a token's claims."""

    user_id: str
    chat_id: str | None
    verified: bool = False
    routing: Routing = NO_ROUTING


class Authenticator:
    def __init__(
        self,
        mode: AuthMode = "trust",
        secret: bytes | None = None,
        trusted_uids: frozenset[int] | set[int] | list[int] = frozenset(),
        *,
        leeway: int = DEFAULT_LEEWAY_SECONDS,
    ) -> None:
        if mode == "token" and not secret:
            raise ValueError("token mode needs a secret")
        self.mode: AuthMode = mode
        self._secret = secret
        self.trusted_uids = frozenset(trusted_uids)
        self.leeway = leeway

    @classmethod
    def from_config(cls, auth: AuthConfig) -> Authenticator:
        """Raises ConfigError for an unreadable or too short secret (token mode only)."""
        if auth.mode == "trust":
            return cls("trust", None, auth.trusted_uids)
        return cls("token", load_token_secret(auth), auth.trusted_uids)

    def __repr__(self) -> str:  # never the secret
        return f"Authenticator(mode={self.mode!r}, trusted_uids={sorted(self.trusted_uids)!r})"

    def is_trusted_peer(self, ctx: CallContext) -> bool:
        return ctx.peer_uid is not None and ctx.peer_uid in self.trusted_uids

    def sees_health_details(self, ctx: CallContext) -> bool:
        """Counts, per-uid connections and backlog are host business, not a sandbox's."""
        return self.mode == "trust" or self.is_trusted_peer(ctx)

    def identify(
        self,
        ctx: CallContext,
        *,
        user_id: str | None,
        chat_id: str | None,
        context_token: str | None,
        routing: Routing = NO_ROUTING,
    ) -> Caller:
        """The caller's identity; raises Unauthorized (token mode) or InvalidParams (no user_id).

        ``routing`` holds the routing params as sent (blank ones as None)."""
        if self.mode == "trust" or (context_token is None and self.is_trusted_peer(ctx)):
            if user_id is None:
                raise InvalidParams.for_field("user_id", "is required")
            for field, value in (("user_id", user_id), ("chat_id", chat_id)):
                problem = None if value is None else identifier_problem(value)
                if problem is not None:
                    raise InvalidParams.for_field(field, problem)
            return Caller(user_id, chat_id, routing=routing)
        if context_token is None:
            self._refuse(ctx, "missing", "context_token", "a context token is required (auth mode is token)")
        assert self._secret is not None
        try:
            claims = verify_token(context_token, self._secret, leeway=self.leeway)
        except TokenError as exc:
            self._refuse(ctx, exc.code, "context_token", exc.reason)
        # Ids a caller sends are never an alternative identity: they must agree with the claims.
        if user_id is not None and user_id != claims.user_id:
            self._refuse(ctx, "mismatch", "user_id", "user_id does not match the context token")
        if chat_id is not None and chat_id != claims.chat_id:
            self._refuse(ctx, "mismatch", "chat_id", "chat_id does not match the context token")
        verified = Routing(
            chat_type=claims.chat_type,
            source_username=claims.source_username,
            source_display_name=claims.source_display_name,
            message_id=claims.message_id,
        )
        for name in (field.name for field in dataclasses.fields(Routing)):
            sent, claimed = getattr(routing, name), getattr(verified, name)
            if sent is not None and claimed is not None and sent != claimed:
                self._refuse(ctx, "mismatch", name, f"{name} does not match the context token")
        return Caller(claims.user_id, claims.chat_id, verified=True, routing=verified)

    def _refuse(self, ctx: CallContext, code: str, field: str, reason: str) -> NoReturn:
        # Logged without the token or any id the caller claimed: the peer uid says who knocked.
        log.info("auth.refused", extra=fields(code=code, uid=ctx.peer_uid, pid=ctx.peer_pid, conn=ctx.connection_id))
        raise Unauthorized(f"Unauthorized: {reason}", {"field": field, "reason": reason, "code": code})
