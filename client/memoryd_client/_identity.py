"""Who the client speaks for: user id, chat id (and chat type) and context token, from arguments
or environment."""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import InvalidIdentity, MissingIdentity
from .identifiers import identifier_problem

USER_ENV_VARS = ("MEMORY_USER_ID", "ASH_USER_ID")
CHAT_ENV_VARS = ("MEMORY_CHAT_ID", "ASH_CHAT_ID")
TOKEN_ENV_VARS = ("MEMORY_CONTEXT_TOKEN", "ASH_CONTEXT_TOKEN")
CHAT_TYPE_ENV_VARS = ("MEMORY_CHAT_TYPE", "ASH_CHAT_TYPE")


@dataclass(frozen=True)
class Identity:
    user_id: Optional[str]
    chat_id: Optional[str]
    context_token: Optional[str]
    #: private, group, supergroup: what the daemon's disclosure rules let the caller see.  With a
    #: token, the token's claim decides (a differing value is refused).
    chat_type: Optional[str] = None

    def params(self) -> Dict[str, Any]:
        """The identity parameters every call carries; absent ones are omitted, not null.

        A token alone is enough (the daemon takes the identity from its verified claims), so
        a token whose claims this client cannot read is still sent, for the daemon to judge.
        """
        if not self.user_id and not self.context_token:
            raise MissingIdentity(
                "memoryd needs a user id: pass MemoryClient(user_id=...), "
                "or set MEMORY_USER_ID (or ASH_USER_ID), or MEMORY_CONTEXT_TOKEN"
            )
        for field, value in (("user_id", self.user_id), ("chat_id", self.chat_id)):
            problem = None if value is None else identifier_problem(value)
            if problem is not None:
                # Refused here, as the daemon would refuse it: never trimmed into another id.
                raise InvalidIdentity(field, f"{field} {problem} (see the identifier rule in docs/security.md)")
        params: Dict[str, Any] = {}
        if self.user_id:
            params["user_id"] = self.user_id
        if self.chat_id:
            params["chat_id"] = self.chat_id
        if self.context_token:
            params["context_token"] = self.context_token
        if self.chat_type:
            params["chat_type"] = self.chat_type
        return params


def _first(explicit: Optional[str], names: Tuple[str, ...], env: Mapping[str, str]) -> Optional[str]:
    # None means "look further"; an explicit "" means "none", so a caller can opt out of a
    # chat id inherited from the environment.
    if explicit is not None:
        return explicit or None
    for name in names:
        value = env.get(name)
        if value:
            return value
    return None


def resolve_identity(
    user_id: Optional[str] = None,
    chat_id: Optional[str] = None,
    context_token: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
    chat_type: Optional[str] = None,
) -> Identity:
    """Each field: the explicit argument, else MEMORY_*, else ASH_*, else the token's claims."""
    env = os.environ if environ is None else environ
    token = _first(context_token, TOKEN_ENV_VARS, env)
    user = _first(user_id, USER_ENV_VARS, env)
    chat = _first(chat_id, CHAT_ENV_VARS, env)
    if token:
        token_user, token_chat = identity_from_token(token)
        if user is None:
            user = token_user
        if chat is None and chat_id is None:
            chat = token_chat
    return Identity(user, chat, token, _first(chat_type, CHAT_TYPE_ENV_VARS, env))


def identity_from_token(token: str) -> Tuple[Optional[str], Optional[str]]:
    """``(sub, chat_id)`` from a JWT-shaped token's payload, NOT verified.

    Only a convenience so a sandbox holding just a token can fill in the ids; the daemon
    verifies the signature and its claims decide, whatever ids the client sends.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None, None
    payload = parts[1]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(raw)
    except (binascii.Error, ValueError):
        return None, None
    if not isinstance(claims, dict):
        return None, None
    sub = claims.get("sub")
    chat = claims.get("chat_id")
    # An id the daemon would refuse is not filled in: the token alone goes, for the daemon to judge.
    return (
        sub if identifier_problem(sub) is None else None,
        chat if identifier_problem(chat) is None else None,
    )
