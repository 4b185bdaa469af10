"""One MCP tool: its definition for ``tools/list`` and the checks its arguments pass first.

A tool takes only what the model decides; who the caller is comes from the environment through
the client, so a call naming a user, chat or token is refused (:data:`IDENTITY_ARGUMENTS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from memory_cli.mcp.jsonschema import first_error, with_integers
from memoryd_client import MemoryClient

Json = Dict[str, Any]
#: What a tool's call answers: its ``structuredContent`` and the short text for text-only clients.
Outcome = Tuple[Json, str]

#: Argument names that would say who the caller is.  None is a tool argument; a call that
#: passes one is refused with this explanation rather than the generic unknown-argument one.
IDENTITY_ARGUMENTS = frozenset(
    {
        "user_id",
        "userId",
        "user",
        "owner",
        "chat_id",
        "chatId",
        "chat",
        "chat_type",
        "context_token",
        "token",
        "session_key",
        "source_username",
        "source_display_name",
        "message_id",
    }
)


class ToolFailed(Exception):
    """The tool ran and failed: the model gets ``isError: true`` and this message."""


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: Json
    output_schema: Json
    read_only: bool
    destructive: bool
    idempotent: bool
    run: Callable[[MemoryClient, Json], Outcome]
    #: Destructive beyond one memory: the call needs ``confirm: true``, and this says what it
    #: would destroy when that is missing.
    confirm: Optional[str] = None

    def definition(self) -> Json:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                # Only this user's memory store: nothing outside it is touched or read.
                "openWorldHint": False,
            },
        }

    def check_arguments(self, arguments: Json) -> Json:
        """The arguments to run the tool with; raise :class:`ToolFailed` naming a bad one."""
        for name in arguments:
            if name in IDENTITY_ARGUMENTS:
                raise ToolFailed(
                    f"{name}: not accepted. This server acts only for the user it was started for "
                    "(from its environment); identity is never taken from tool arguments."
                )
        if self.confirm is not None and arguments.get("confirm") is not True:
            raise ToolFailed(
                f"confirm: must be true. {self.confirm} It cannot be undone: ask the user whether they want "
                "this, and only if they say so call again with confirm: true. Nothing was deleted."
            )
        error = first_error(arguments, self.input_schema)
        if error:
            raise ToolFailed(f"Invalid arguments for {self.name}: {error}")
        return with_integers(arguments, self.input_schema)
