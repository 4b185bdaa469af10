"""Human output of the ``memory`` command: pure functions from RPC results to text lines."""

from __future__ import annotations

import unicodedata
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence

Record = Dict[str, Any]

MIN_SHORT_ID = 8
ELLIPSIS = "..."


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) become single spaces: one memory, one line."""
    return " ".join(str(text).split())


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    return sum(_char_width(char) for char in text)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal columns, ending in "..." when something was cut."""
    if display_width(text) <= width:
        return text
    budget = max(width - len(ELLIPSIS), 0)
    used = 0
    kept = []
    for char in text:
        char_width = _char_width(char)
        if used + char_width > budget:
            break
        kept.append(char)
        used += char_width
    return "".join(kept) + ELLIPSIS[: max(width - used, 0)]


def pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


def short_ids(ids: Sequence[str], minimum: int = MIN_SHORT_ID) -> Dict[str, str]:
    """The shortest prefix (>= ``minimum``) that tells each id apart from the others shown."""
    result: Dict[str, str] = {}
    for memory_id in ids:
        length = min(minimum, len(memory_id))
        while length < len(memory_id) and any(
            other != memory_id and other.startswith(memory_id[:length]) for other in ids
        ):
            length += 1
        result[memory_id] = memory_id[:length]
    return result


def parse_time(value: Optional[str]) -> Optional[datetime]:
    if not value:
        return None
    try:
        # fromisoformat() before Python 3.11 does not read a "Z" suffix.
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def age(created_at: Optional[str], now: datetime) -> str:
    """``45s``, ``12m``, ``5h``, ``3d``, ``6w``, ``2y``."""
    created = parse_time(created_at)
    if created is None:
        return "?"
    seconds = max(int((now - created).total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    if seconds < 14 * 86400:
        return f"{seconds // 86400}d"
    if seconds < 365 * 86400:
        return f"{seconds // (7 * 86400)}w"
    return f"{seconds // (365 * 86400)}y"


def is_expired(record: Record, now: datetime) -> bool:
    expires = parse_time(record.get("expires_at"))
    return expires is not None and expires <= now


def about(record: Record) -> str:
    """Who a memory is about: the daemon's ``about`` (the caller's people it is linked to),
    else its subjects."""
    names = record.get("about") or record.get("subjects") or []
    return ", ".join(one_line(name) for name in names if isinstance(name, str))


def scope_label(scope: Optional[str]) -> str:
    """The wire says personal/group; the command line says personal/shared (``--shared``)."""
    return "shared" if scope == "group" else "personal"


def search_lines(hits: Sequence[Record]) -> List[str]:
    """``[0.87] content (about Sarah) [source]`` per hit, best first: the number is the hit's
    score, the one the list is sorted by (0..1, higher first)."""
    if not hits:
        return ["No memories found."]
    lines = []
    for hit in hits:
        number = hit.get("score")
        parts = [f"[{float(number) if isinstance(number, (int, float)) else 0.0:.2f}]"]
        parts.append(one_line(hit.get("content", "")))
        subjects = about(hit)
        if subjects:
            parts.append(f"(about {subjects})")
        source = hit.get("source")
        if source:
            parts.append(f"[{one_line(source)}]")
        lines.append(" ".join(parts))
    return lines


def list_lines(memories: Sequence[Record], width: int, now: Optional[datetime] = None) -> List[str]:
    """A table (short id, age, scope, about, source, content cut to ``width``), then ``Total: N``."""
    if not memories:
        return ["No memories found.", "Total: 0"]
    now = now or datetime.now(timezone.utc)
    ids = short_ids([str(m.get("id", "?")) for m in memories])
    rows = []
    for memory in memories:
        content = one_line(memory.get("content", ""))
        if is_expired(memory, now):
            content = "[expired] " + content
        rows.append(
            [
                ids[str(memory.get("id", "?"))],
                age(memory.get("created_at"), now),
                scope_label(memory.get("scope")),
                fit(about(memory) or "-", 16),
                fit(one_line(memory.get("source") or "-"), 12),
                content,
            ]
        )
    header = ["ID", "AGE", "SCOPE", "ABOUT", "SOURCE", "CONTENT"]
    widths = [max(display_width(row[i]) for row in rows + [header]) for i in range(5)]
    content_width = max(width - sum(widths) - 2 * len(widths), 10)
    lines = []
    for row in [header] + rows:
        cells = [pad(cell, widths[i]) for i, cell in enumerate(row[:5])]
        lines.append("  ".join(cells + [fit(row[5], content_width)]).rstrip())
    lines.append(f"Total: {len(memories)}")
    return lines


def health_lines(health: Record) -> List[str]:
    lines = [
        f"memoryd {health.get('version', '?')}: {health.get('status', '?')} (up {_duration(health.get('uptime_seconds'))})"
    ]
    counts = health.get("counts")
    if isinstance(counts, dict) and counts:
        lines.append("counts: " + ", ".join(f"{key} {value}" for key, value in counts.items()))
    embedder = health.get("embedder")
    if isinstance(embedder, dict) and embedder:
        state = ", ".join(f"{key} {value}" for key, value in embedder.items() if not isinstance(value, (dict, list)))
        lines.append(f"embedder: {state}")
    backlog = health.get("backlog")
    if isinstance(backlog, dict) and backlog:
        lines.append("backlog: " + ", ".join(f"{key} {value}" for key, value in backlog.items()))
    return lines


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "?"
    whole = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def replaced_line(memory_id: str, content: Optional[str]) -> str:
    """``replaced: 1A2B3C4D "old content"``: what a new memory superseded."""
    short = memory_id[:MIN_SHORT_ID]
    if content is None:  # deleted since, or not visible to this caller
        return f"replaced: {short}"
    return f'replaced: {short} "{one_line(content)}"'


def history_lines(versions: Sequence[Record]) -> List[str]:
    """One line per version, oldest first: short id, date, content, and what became of it."""
    if not versions:
        return ["No history."]
    ids = short_ids([str(v.get("id", "?")) for v in versions])
    lines = []
    for version in versions:
        replaced_by = version.get("superseded_by")
        if replaced_by:
            state = f"replaced by {ids.get(str(replaced_by), str(replaced_by)[:MIN_SHORT_ID])}"
            reason = version.get("supersede_reason")
            if reason:
                state += f": {one_line(str(reason))}"
        else:
            state = "current"
        created = str(version.get("created_at") or "")[:10] or "?"
        lines.append(
            f"{ids[str(version.get('id', '?'))]}  {created}  {one_line(version.get('content', ''))}  ({state})"
        )
    return lines
