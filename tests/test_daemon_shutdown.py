"""`memoryd serve` stopping on SIGTERM: idle connections close at once, running calls keep their
grace period (shutdown_grace) and are answered."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from typing import Any

from tests.fake_backends import FakeBackend, Reply
from tests.wire import sync_call

#: The embedding request a search makes for its query while the test holds it.
SLOW_DELAY = 2.0


def _request(method: str, params: dict[str, Any], id: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": id}).encode() + b"\n"


def test_sigterm_with_an_idle_client_connected_exits_within_a_second(daemon_process: Any) -> None:
    process = daemon_process().start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.settimeout(30)
        idle.connect(str(process.socket))
        idle.sendall(_request("system.health", {}))
        assert b'"status":"ok"' in idle.makefile("rb").readline()
        # The client now sits there, connected and saying nothing (as an agent's CLI between
        # calls does): it must not hold the daemon for shutdown_grace (10 s by default).
        started = time.monotonic()
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(30) == 0
        took = time.monotonic() - started
        assert took < 1.0, f"SIGTERM took {took:.2f} s with an idle client connected"
        assert idle.recv(1) == b""  # closed by the daemon, not left hanging


def test_sigterm_lets_a_running_call_finish_within_the_grace_period(daemon_process: Any) -> None:
    held = threading.Event()

    def slow_query(request: dict[str, Any]) -> Reply:
        held.set()
        return Reply(delay=SLOW_DELAY)

    with FakeBackend("openai") as backend:
        env = {
            "MEMORYD_EMBED_URL": backend.url,
            "MEMORYD_EMBED_MODEL": "fake-embed",
            "MEMORYD_EMBED_QUERY_TIMEOUT": "30",
            "MEMORYD_EMBED_TIMEOUT": "30",
            "MEMORYD_EMBED_ADD_WAIT": "30",
        }
        process = daemon_process("--embedder", "openai", env=env).start()
        deadline = time.monotonic() + 30
        # Until the backend's dimension is known: an add before that leaves its text to the
        # backfill, and a search before it asks for no query vector.
        while not sync_call(process.socket, "system.health")["result"]["embedder"]["vector_space_ready"]:
            assert time.monotonic() < deadline, "the daemon never learned the backend's dimension"
            time.sleep(0.02)
        added = sync_call(process.socket, "memory.add", {"user_id": "u", "content": "walks the dog at seven"})
        assert added["result"]["embedded"] is True
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(30)
            client.connect(str(process.socket))
            backend.script.append(slow_query)
            client.sendall(_request("memory.search", {"user_id": "u", "query": "when is the dog walked"}))
            assert held.wait(30), "the search never asked for its query embedding"
            started = time.monotonic()
            process.proc.send_signal(signal.SIGTERM)
            reply = json.loads(client.makefile("rb").readline())
            assert process.proc.wait(30) == 0
            took = time.monotonic() - started
    # Answered with its result, not ShuttingDown: the call ran to its end inside the grace period.
    assert "result" in reply, reply
    assert reply["result"][0]["content"] == "walks the dog at seven"
    assert took < 10.0  # well inside shutdown_grace, and only as long as the call needed
