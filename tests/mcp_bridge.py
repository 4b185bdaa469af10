"""Helpers for the `memory mcp` tests: the bridge as a subprocess, raw over its pipes or through
the official MCP SDK's client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import trio
from mcp import Client, StdioServerParameters

from tests.conftest import REPO

# The interpreter a minimal image has, with no site-packages (-S) nor PYTHON* variables (-I).
BARE_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"


def build_pyz(directory: Path) -> Path:
    target = directory / "memory.pyz"
    subprocess.run(
        [sys.executable, "sandbox-cli/build_zipapp.py", "-o", str(target)], cwd=REPO, check=True, capture_output=True
    )
    return target


def bridge_env(socket_path: Path | str, **identity: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MEMORYD_SOCKET": str(socket_path), **identity}


def bridge_argv(pyz: Path) -> list[str]:
    return [BARE_PYTHON, "-I", "-S", str(pyz), "mcp"]


@asynccontextmanager
async def sdk_client(pyz: Path, env: dict[str, str], mode: str) -> AsyncIterator[Client]:
    argv = bridge_argv(pyz)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        yield client


def check_schema(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)


def validate(instance: Any, schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(schema).validate(instance)


class RawBridge:
    """The bridge driven byte for byte, as a client the SDK cannot imitate would."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.buffer = b""
        self.next_id = 1

    @classmethod
    @asynccontextmanager
    async def open(cls, pyz: Path, env: dict[str, str]) -> AsyncIterator[RawBridge]:
        process = await trio.lowlevel.open_process(
            bridge_argv(pyz), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        bridge = cls(process)
        try:
            yield bridge
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with trio.fail_after(10):
                await process.wait()
            assert process.returncode == 0, process.returncode

    async def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_bytes(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with trio.fail_after(20):
            while b"\n" not in self.buffer:
                chunk = await self.process.stdout.receive_some(65536)
                assert chunk, "the bridge closed its stdout"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        reply = await self.receive()
        assert reply["id"] == request_id, reply
        return reply

    async def initialize(self, version: str) -> dict[str, Any]:
        reply = await self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    async def modern(self, method: str, params: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
        meta = {VERSION_KEY: version, CAPABILITIES_KEY: {}}
        return await self.request(method, {**(params or {}), "_meta": meta})

    async def call_tool(self, name: str, arguments: dict[str, Any], modern: bool = False) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments}
        reply = await (self.modern("tools/call", params) if modern else self.request("tools/call", params))
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result
