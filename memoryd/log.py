"""Structured logs on stderr: one ``key=value`` (or JSON) line per event.

Call sites pass fields through ``extra={"fields": {...}}`` via :func:`fields`.  Info-level lines
carry ids, counts and timings only — never memory contents, queries or tokens.  Warnings and
errors are rate-limited per kind (:class:`RepeatLimiter`): a peer that provokes the same failure
5,000 times gets a handful of lines and a count, not megabytes of tracebacks.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

_RESERVED = {"ts", "level", "logger", "event"}


def fields(**values: Any) -> dict[str, Any]:
    """``logger.info("event", extra=fields(a=1))``."""
    return {"fields": values}


class _Formatter(logging.Formatter):
    def __init__(self, json_lines: bool) -> None:
        super().__init__()
        self.json_lines = json_lines

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in getattr(record, "fields", {}).items():
            entry[f"{key}_" if key in _RESERVED else key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if self.json_lines:
            return json.dumps(entry, default=str, ensure_ascii=False)
        return " ".join(f"{key}={_kv_value(value)}" for key, value in entry.items())


def _kv_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and not any(ch in text for ch in ' "=\n\t\\'):
        return text
    return json.dumps(text, ensure_ascii=False)


class RepeatLimiter(logging.Filter):
    """At most ``burst`` warnings/errors of one kind per ``window`` seconds; the first line of the
    next window says how many were dropped (field ``suppressed``).

    A kind is the logger, the level, the message template (not its arguments: they hold
    connection ids) and the exception's type.
    """

    #: Kinds remembered at most; past it, kinds whose window is over are forgotten.
    MAX_KINDS = 1024

    def __init__(self, burst: int = 10, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self.clock = clock
        # kind -> [window start, lines in this window, lines dropped in this window]
        self._kinds: dict[tuple[Any, ...], list[Any]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc_type = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else None
        kind = (record.name, record.levelno, str(record.msg), exc_type)
        now = self.clock()
        state = self._kinds.get(kind)
        if state is None or now - state[0] >= self.window:
            if state is None and len(self._kinds) >= self.MAX_KINDS:
                self._forget_old(now)
            dropped = state[2] if state is not None else 0
            self._kinds[kind] = [now, 1, 0]
            if dropped:
                record.fields = {**getattr(record, "fields", {}), "suppressed": dropped}
            return True
        state[1] += 1
        if state[1] <= self.burst:
            if state[1] == self.burst:
                record.fields = {**getattr(record, "fields", {}), "repeats_muted_seconds": self.window}
            return True
        state[2] += 1
        return False

    def _forget_old(self, now: float) -> None:
        for kind, state in list(self._kinds.items()):
            if now - state[0] >= self.window:
                del self._kinds[kind]
        if len(self._kinds) >= self.MAX_KINDS:
            self._kinds.clear()


def setup_logging(level: str = "info", fmt: str = "kv", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Formatter(json_lines=fmt == "json"))
    handler.addFilter(RepeatLimiter())
    root = logging.getLogger("memoryd")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # The PostgreSQL driver's pool warns about every failed connection attempt (each second
    # while the server is down): through the same format and repeat limit, not as bare lines
    # that break a JSON log.
    driver = logging.getLogger("psycopg")
    driver.handlers[:] = [handler]
    driver.setLevel(logging.WARNING)
    driver.propagate = False
