"""Structured logs on stderr: one ``key=value`` (or JSON) line per event.

Call sites pass fields through ``extra={"fields": {...}}`` via :func:`fields`.  Info-level lines
carry ids, counts and timings only — never memory contents, queries or tokens.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
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


def setup_logging(level: str = "info", fmt: str = "kv", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Formatter(json_lines=fmt == "json"))
    root = logging.getLogger("memoryd")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
