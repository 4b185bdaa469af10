"""MemoryClient against a real NDJSON JSON-RPC server on a Unix socket (a thread, no mocks)."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import (
    ConnectionLost,
    DaemonUnavailable,
    InvalidParams,
    MemoryClient,
    MemorydRpcError,
    MissingIdentity,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RequestTimeout,
    Unavailable,
)

Reply = dict[str, Any] | None


def fake_rpc(request: dict[str, Any]) -> Reply | str:
    """The canned daemon: echoes method and params, with a few test methods that misbehave.

    Returns a reply object, None to never answer, or "close" to hang up without answering.
    """
    method, params, rid = request["method"], request.get("params", {}), request["id"]
    if method == "test.silent":
        return None
    if method == "test.hangup":
        return "close"
    if method == "test.fail":
        error = {"code": params["code"], "message": params["message"]}
        if "data" in params:
            error["data"] = params["data"]
        return {"jsonrpc": "2.0", "id": rid, "error": error}
    if method == "test.wrong_id":
        return {"jsonrpc": "2.0", "id": rid + 1000, "result": "stale"}
    if method == "test.too_large":
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32004, "message": "Payload too large"}}
    return {"jsonrpc": "2.0", "id": rid, "result": {"method": method, "params": params}}


class FakeDaemon:
    """A thread serving NDJSON JSON-RPC on a Unix socket; ``stop()`` hangs up on every client."""

    def __init__(self, path: str, rpc: Callable[[dict[str, Any]], Reply | str] = fake_rpc) -> None:
        self.path = path
        self.rpc = rpc
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> FakeDaemon:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(16)
        self._listener = listener
        self._spawn(self._accept_loop, listener)
        return self

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            for line in conn.makefile("rb"):
                request = json.loads(line)
                with self._lock:
                    self.requests.append(request)
                reply = self.rpc(request)
                if reply == "close":
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                if reply is not None:
                    conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass

    @property
    def listening(self) -> bool:
        return self._listener is not None and self._listener.fileno() != -1

    def stop(self) -> None:
        """Like a daemon exiting: the listener goes, the socket file goes, connections are cut."""
        assert self._listener is not None
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
        self._listener.close()
        os.unlink(self.path)
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
        for thread in self._threads:
            thread.join(timeout=5)


@pytest.fixture
def sock_dir(short_tmp: Path) -> Path:
    # tmp_path can exceed the 108-byte AF_UNIX limit; short_tmp is in /tmp.
    return short_tmp


@pytest.fixture
def server(sock_dir: Path) -> Iterator[FakeDaemon]:
    daemon = FakeDaemon(str(sock_dir / "d.sock")).start()
    yield daemon
    if daemon.listening:
        daemon.stop()


pytestmark = pytest.mark.usefixtures("clean_client_env")


def test_calls_carry_the_identity_and_the_typed_params(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="alice", chat_id="team", timeout=5) as client:
        added = client.add("Alice likes tea", subjects=("alice",), expires_days=7, shared=True)
        assert added == {
            "method": "memory.add",
            "params": {
                "user_id": "alice",
                "chat_id": "team",
                "content": "Alice likes tea",
                "expires_days": 7,
                "subjects": ["alice"],
                "shared": True,
            },
        }
        assert client.add("x", source="user")["params"] == {
            "user_id": "alice",
            "chat_id": "team",
            "content": "x",
            "source": "user",
            "shared": False,
        }
        assert client.search("tea", limit=3)["params"] == {
            "user_id": "alice",
            "chat_id": "team",
            "query": "tea",
            "limit": 3,
        }
        assert client.list(limit=5, before_id="01J0000000", include_expired=True)["params"] == {
            "user_id": "alice",
            "chat_id": "team",
            "limit": 5,
            "offset": 0,
            "before_id": "01J0000000",
            "include_expired": True,
        }
        assert client.delete("01J00000")["params"]["memory_id"] == "01J00000"
        assert client.health() == {"method": "system.health", "params": {"user_id": "alice", "chat_id": "team"}}
    assert server.connections == 1, "one persistent connection for all calls"
    assert [r["id"] for r in server.requests] == [1, 2, 3, 4, 5, 6]
    assert all(r["jsonrpc"] == "2.0" for r in server.requests)


def test_sensitivity_this_chat_and_chat_type_are_sent_only_when_set(
    server: FakeDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryClient(server.path, user_id="alice", chat_id="dm", chat_type="private", timeout=5) as client:
        assert client.add("y", sensitivity="sensitive")["params"]["sensitivity"] == "sensitive"
        assert client.search("tea", this_chat=True)["params"]["this_chat"] is True
        assert client.list(this_chat=True)["params"]["this_chat"] is True
        assert client.search("tea", types=["episode"])["params"]["types"] == ["episode"]
        assert client.list(types="episode")["params"]["types"] == ["episode"]
        assert client.list()["params"] == {
            "user_id": "alice",
            "chat_id": "dm",
            "chat_type": "private",
            "limit": 20,
            "offset": 0,
            "include_expired": False,
        }
    monkeypatch.setenv("ASH_CHAT_TYPE", "group")
    with MemoryClient(server.path, user_id="alice", timeout=5) as client:
        assert client.search("tea")["params"] == {"user_id": "alice", "chat_type": "group", "query": "tea", "limit": 10}


def test_identity_and_socket_come_from_the_environment(server: FakeDaemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASH_RPC_SOCKET", server.path)
    monkeypatch.setenv("ASH_USER_ID", "ash-user")
    monkeypatch.setenv("ASH_CONTEXT_TOKEN", "ash.token.sig")
    with MemoryClient() as client:
        assert client.health()["params"] == {"user_id": "ash-user", "context_token": "ash.token.sig"}
    monkeypatch.setenv("MEMORY_USER_ID", "mem-user")
    monkeypatch.setenv("MEMORY_CHAT_ID", "mem-chat")
    monkeypatch.setenv("MEMORY_CONTEXT_TOKEN", "mem.token.sig")
    with MemoryClient() as client:
        assert client.health()["params"] == {
            "user_id": "mem-user",
            "chat_id": "mem-chat",
            "context_token": "mem.token.sig",
        }
    with MemoryClient(user_id="arg", chat_id="argchat", context_token="arg.token.sig") as client:
        assert client.health()["params"] == {
            "user_id": "arg",
            "chat_id": "argchat",
            "context_token": "arg.token.sig",
        }


def test_generic_call_adds_identity_and_lets_params_override(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="alice") as client:
        assert client.call("custom.method", a=1) == {
            "method": "custom.method",
            "params": {"user_id": "alice", "a": 1},
        }
        assert client.call("custom.method", user_id="bob")["params"] == {"user_id": "bob"}


def test_missing_user_id_fails_at_call_time_without_connecting(server: FakeDaemon) -> None:
    client = MemoryClient(server.path)
    with pytest.raises(MissingIdentity, match="MEMORY_USER_ID"):
        client.search("anything")
    assert server.connections == 0


@pytest.mark.parametrize(
    ("code", "data", "cls"),
    [
        (-32602, {"field": "limit", "reason": "must be >= 1"}, InvalidParams),
        (-32001, None, NotFound),
        (-32007, {"backend": "embedder"}, Unavailable),
        (-32050, "whatever", MemorydRpcError),
    ],
)
def test_error_replies_raise_their_exception_with_code_message_and_data(
    server: FakeDaemon, code: int, data: Any, cls: type[MemorydRpcError]
) -> None:
    with MemoryClient(server.path, user_id="u") as client:
        params: dict[str, Any] = {"code": code, "message": f"failed {code}"}
        if data is not None:
            params["data"] = data
        with pytest.raises(cls) as caught:
            client.call("test.fail", **params)
        assert type(caught.value) is cls
        assert (caught.value.code, caught.value.message, caught.value.data) == (code, f"failed {code}", data)
        # An error reply leaves the connection usable.
        assert client.health()["method"] == "system.health"
    assert server.connections == 1


def test_invalid_params_exposes_field_and_reason(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u") as client:
        with pytest.raises(InvalidParams) as caught:
            client.call(
                "test.fail",
                code=-32602,
                message="Invalid params: limit: must be >= 1",
                data={"field": "limit", "reason": "must be >= 1"},
            )
    assert (caught.value.field, caught.value.reason) == ("limit", "must be >= 1")
    assert str(caught.value) == "Invalid params: limit: must be >= 1"


def test_missing_socket_raises_daemon_unavailable_naming_path_and_remedy(sock_dir: Path) -> None:
    path = str(sock_dir / "absent.sock")
    with pytest.raises(DaemonUnavailable) as caught:
        MemoryClient(path, user_id="u").health()
    message = str(caught.value)
    assert path in message
    assert "memoryd serve" in message and "systemctl --user start memoryd" in message
    assert "MEMORYD_SOCKET" in message
    assert caught.value.socket_path == path


def test_stale_socket_file_raises_daemon_unavailable(sock_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(sock_dir / "stale.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.close()  # the file stays, nobody listens: like a daemon killed with SIGKILL
    monkeypatch.setenv("MEMORYD_SOCKET", path)
    with pytest.raises(DaemonUnavailable, match="refused") as caught:
        MemoryClient(user_id="u").health()
    assert "$MEMORYD_SOCKET" in str(caught.value)


def test_silent_daemon_times_out_and_the_next_call_uses_a_fresh_connection(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u", timeout=0.2) as client:
        with pytest.raises(RequestTimeout):
            client.call("test.silent")
        with pytest.raises(TimeoutError):
            client.call("test.silent")
        client.timeout = 5
        assert client.health()["method"] == "system.health"
    assert server.connections == 3, "a timed-out connection is never reused"


def test_reconnects_after_the_daemon_restarts_on_the_same_path(sock_dir: Path) -> None:
    path = str(sock_dir / "d.sock")
    first = FakeDaemon(path).start()
    with MemoryClient(path, user_id="u", timeout=5) as client:
        assert client.add("before")["params"]["content"] == "before"
        first.stop()
        second = FakeDaemon(path).start()
        try:
            assert client.add("after")["params"]["content"] == "after"
            assert [r["params"]["content"] for r in second.requests] == ["after"]
            assert second.connections == 1
        finally:
            second.stop()


def test_connection_cut_before_the_reply_is_resent_once(sock_dir: Path) -> None:
    path = str(sock_dir / "d.sock")
    calls = 0

    def hang_up_first_time(request: dict[str, Any]) -> Reply | str:
        nonlocal calls
        calls += 1
        return "close" if calls == 1 else fake_rpc(request)

    server = FakeDaemon(path, hang_up_first_time).start()
    try:
        with MemoryClient(path, user_id="u", timeout=5) as client:
            assert client.add("once")["params"]["content"] == "once"
        assert [r["id"] for r in server.requests] == [1, 1], "the same request, resent"
        assert server.connections == 2
    finally:
        server.stop()


def test_connection_cut_twice_raises_connection_lost(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u", timeout=5) as client:
        with pytest.raises(ConnectionLost):
            client.call("test.hangup")
        assert client.health()["method"] == "system.health"
    assert len([r for r in server.requests if r["method"] == "test.hangup"]) == 2


def test_daemon_gone_for_good_raises_daemon_unavailable(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u", timeout=5) as client:
        client.health()
        server.stop()
        with pytest.raises(DaemonUnavailable, match="no such socket"):
            client.health()


def test_reply_with_another_id_is_a_protocol_error_and_the_connection_is_replaced(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u", timeout=5) as client:
        with pytest.raises(ProtocolError, match="does not match"):
            client.call("test.wrong_id")
        assert client.health()["method"] == "system.health"
    assert server.connections == 2


def test_connection_level_error_with_null_id_is_raised(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u", timeout=5) as client:
        with pytest.raises(PayloadTooLarge):
            client.call("test.too_large")
        assert client.health()["method"] == "system.health"
    assert server.connections == 2


def test_oversized_request_gets_the_daemons_payload_too_large_not_a_resend(sock_dir: Path) -> None:
    path = str(sock_dir / "d.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    accepted: list[int] = []

    def refuse_big_messages() -> None:
        # Like the daemon's framing cap: answer with a null-id error, then hang up mid-request.
        conn, _ = listener.accept()
        accepted.append(1)
        conn.recv(65536)
        conn.sendall(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32004,"message":"Payload too large"}}\n')
        conn.close()

    thread = threading.Thread(target=refuse_big_messages, daemon=True)
    thread.start()
    try:
        with pytest.raises(PayloadTooLarge):
            MemoryClient(path, user_id="u", timeout=5).add("x" * 4_000_000)
    finally:
        thread.join(timeout=5)
        listener.close()
    assert accepted == [1]


def test_garbage_reply_is_a_protocol_error(sock_dir: Path) -> None:
    path = str(sock_dir / "d.sock")

    def garbage(request: dict[str, Any]) -> Reply | str:
        return {"not": "jsonrpc", "id": request["id"]}

    server = FakeDaemon(path, garbage).start()
    try:
        with pytest.raises(ProtocolError, match="JSON-RPC"):
            MemoryClient(path, user_id="u", timeout=5).health()
    finally:
        server.stop()


def test_one_client_is_safe_to_share_between_threads(server: FakeDaemon) -> None:
    results: dict[tuple[int, int], Any] = {}
    with MemoryClient(server.path, user_id="u", timeout=10) as client:

        def worker(n: int) -> None:
            for i in range(25):
                results[(n, i)] = client.search(f"q-{n}-{i}")["params"]["query"]

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {(n, i): f"q-{n}-{i}" for n in range(8) for i in range(25)}
    assert sorted(r["id"] for r in server.requests) == list(range(1, 201))


def test_unicode_and_newlines_in_content_survive_the_line_framing(server: FakeDaemon) -> None:
    content = 'line one\nline two\r\n\u2028 caf\u00e9 \U0001f375 "quoted"'
    with MemoryClient(server.path, user_id="u") as client:
        assert client.add(content)["params"]["content"] == content


def test_nan_is_refused_before_sending(server: FakeDaemon) -> None:
    with MemoryClient(server.path, user_id="u") as client:
        with pytest.raises(ValueError):
            client.add("x", expires_days=float("nan"))
        assert client.health()["method"] == "system.health"


def test_non_positive_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="timeout"):
        MemoryClient(user_id="u", timeout=0)
