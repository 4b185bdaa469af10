"""A database URL as it may be shown: without its password (logs, `memoryd config`, errors)."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(://[^:/@]*):[^@/]*@")
# A URL's query parameter, or a keyword string's ``password = value`` (libpq allows spaces
# around '=' and single-quoted values holding spaces).
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redacted(url: str) -> str:
    """``url`` (a libpq URL or keyword string) with any password replaced by ``***``."""
    return _KEYWORD_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", url))
