"""Parameters of the typed methods, shared by the blocking and the trio client.

Only what the caller set is sent: the daemon owns the defaults and the validation (its
InvalidParams names the bad field), so they are not duplicated here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

Record = Dict[str, Any]
Records = List[Record]


def _drop_none(params: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in params.items() if value is not None}


def add_params(
    content: str,
    source: Optional[str],
    expires_days: Optional[float],
    subjects: Optional[Sequence[str]],
    shared: bool,
    supersedes: Optional[str] = None,
    key: Optional[str] = None,
    sensitivity: Optional[str] = None,
) -> Dict[str, Any]:
    return _drop_none(
        {
            "content": content,
            "source": source,
            "expires_days": expires_days,
            "subjects": None if subjects is None else list(subjects),
            "shared": shared,
            "supersedes": supersedes,
            "key": key,
            "sensitivity": sensitivity,
        }
    )


def search_params(
    query: str,
    limit: int,
    about: Optional[str] = None,
    include_superseded: bool = False,
    this_chat: bool = False,
    min_relevance: Optional[float] = None,
    types: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    return _drop_none(
        {
            "query": query,
            "limit": limit,
            **_scope(about, include_superseded, this_chat),
            "min_relevance": min_relevance,
            "types": _types(types),
        }
    )


def list_params(
    limit: int,
    offset: int,
    before_id: Optional[str],
    include_expired: bool,
    about: Optional[str] = None,
    include_superseded: bool = False,
    this_chat: bool = False,
    types: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    return _drop_none(
        {
            "limit": limit,
            "offset": offset,
            "before_id": before_id,
            "include_expired": include_expired,
            **_scope(about, include_superseded, this_chat),
            "types": _types(types),
        }
    )


def _scope(about: Optional[str], include_superseded: bool, this_chat: bool) -> Dict[str, Any]:
    """The filters search and list share; the flags are sent only when set, so a client works
    with daemons that predate them."""
    return {"about": about, "include_superseded": include_superseded or None, "this_chat": this_chat or None}


def _types(types: Optional[Sequence[str]]) -> Optional[List[str]]:
    """Memory types as the list the daemon takes (a bare string is one type, not its letters)."""
    if types is None:
        return None
    return [types] if isinstance(types, str) else list(types)


def context_params(
    message: str,
    limit: Optional[int],
    max_chars: Optional[int],
    min_relevance: Optional[float] = None,
    include_summary: Optional[bool] = None,
) -> Dict[str, Any]:
    return _drop_none(
        {
            "message": message,
            "limit": limit,
            "max_chars": max_chars,
            "min_relevance": min_relevance,
            "include_summary": include_summary,
        }
    )


def forget_person_params(person: str, delete_person_record: bool) -> Dict[str, Any]:
    return {"person": person, "delete_person_record": delete_person_record}


def memory_id_params(memory_id: str) -> Dict[str, Any]:
    return {"memory_id": memory_id}


def person_params(name: str, limit: Optional[int]) -> Dict[str, Any]:
    return _drop_none({"name": name, "limit": limit})


def merge_params(from_: str, into: str) -> Dict[str, Any]:
    return {"from": from_, "into": into}


def observe_params(messages: Sequence[Record], session_key: Optional[str]) -> Dict[str, Any]:
    return _drop_none({"messages": [dict(message) for message in messages], "session_key": session_key})


#: Seconds the two extract methods wait by default: they wait on the daemon's LLM, which the
#: daemon itself gives its request timeout plus the LLM's longest call (about 450 s with the
#: default ``[limits]`` and ``[llm]``), so the client's per-call timeout would cut them short.
EXTRACT_TIMEOUT = 600.0


def extract_params(message_id: str, session_key: Optional[str]) -> Dict[str, Any]:
    return _drop_none({"message_id": message_id, "session_key": session_key})


def extract_from_messages_params(
    messages: Sequence[Record],
    message_id: Optional[str],
    shared: bool,
    source_username: Optional[str],
    source_display_name: Optional[str],
    chat_type: Optional[str],
) -> Dict[str, Any]:
    return _drop_none(
        {
            "messages": [dict(message) for message in messages],
            "message_id": message_id,
            "shared": shared,
            "source_username": source_username,
            "source_display_name": source_display_name,
            "chat_type": chat_type,
        }
    )
