"""The secrets policy at the service's door: ``memory.add`` refuses or redacts credentials in
every text it stores (content, source, subjects, key, metadata keys and values), observed
messages are stored redacted, a session key holding one is refused, and extraction's filter
reports what it found; ``system.health`` shows the counts since start."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from memoryd.errors import InvalidParams
from memoryd.secrets import SecretKind, SecretsMode, scan, screen


class SecretsGuard:
    def __init__(self, mode: SecretsMode) -> None:
        self.mode = mode
        self.found: Counter[SecretKind] = Counter()
        self.refused = 0
        self.redacted = 0

    def screen_add(self, field: str, text: str) -> str:
        """The text to store: itself, or redacted; -32602 naming ``field`` and the kinds (never
        the secret) when the mode is refuse."""
        screened, scan = screen(text, self.mode)
        if scan.clean:
            return text
        self.found.update(scan.found)
        if screened is None:
            self.refused += 1
            kinds = ", ".join(sorted(scan.found))
            raise InvalidParams.for_field(
                field, f"looks like it holds a secret ({kinds}); memoryd does not store credentials"
            )
        self.redacted += 1
        return screened

    def screen_identifier(self, field: str, text: str) -> str:
        """An identifier the caller chose (a session key): refused with -32602 naming ``field``
        when it holds a secret, whatever the mode, because a redacted identifier would name
        another thing (every session keyed by a credential would become the one "[redacted]")."""
        result = scan(text)
        if result.clean:
            return text
        self.found.update(result.found)
        self.refused += 1
        kinds = ", ".join(sorted(result.found))
        raise InvalidParams.for_field(
            field, f"looks like it holds a secret ({kinds}); memoryd does not store credentials, use another key"
        )

    def screen_metadata(self, field: str, value: Any) -> Any:
        """``value`` (decoded JSON) with every string in it, keys included, screened as
        :meth:`screen_add` screens text; refused as a whole under ``field``."""
        if isinstance(value, str):
            return self.screen_add(field, value)
        if isinstance(value, list):
            return [self.screen_metadata(field, item) for item in value]
        if isinstance(value, dict):
            return {self.screen_add(field, key): self.screen_metadata(field, item) for key, item in value.items()}
        return value

    def redact_observed(self, text: str) -> str:
        """An observed message as it is stored: always redacted, whatever the mode, because
        refusing it would drop the conversation around the secret too."""
        result = scan(text)
        if result.clean:
            return text
        self.found.update(result.found)
        self.redacted += 1
        return result.text

    def count_extracted(self, found: Mapping[SecretKind, int], *, refused: int, redacted: int) -> None:
        """What extraction's filter found in proposed facts (dropped or redacted)."""
        self.found.update(found)
        self.refused += refused
        self.redacted += redacted

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "refused": self.refused, "redacted": self.redacted, "by_kind": dict(self.found)}
