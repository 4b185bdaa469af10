"""Both clients connect through a burst: EAGAIN (accept queue full) and ECONNREFUSED (nobody
listening yet) are retried with jittered backoff within the timeout.

A small server on a real socket plays the daemon: it binds first and only listens (or accepts)
a moment later, so the first connects must fail.  Then 300 clients at once against a real
daemon subprocess, with a tiny listen backlog so most of them meet EAGAIN.
"""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd_client import AsyncMemoryClient, DaemonUnavailable, MemoryClient
from tests.wire import read_line

BURST = 300


def answer_one(conn: socket.socket) -> None:
    """Read one NDJSON request and answer it with a result."""
    with conn:
        data = read_line(conn)
        if not data.endswith(b"\n"):
            return
        request = json.loads(data)
        conn.sendall(json.dumps({"jsonrpc": "2.0", "result": {"status": "ok"}, "id": request["id"]}).encode() + b"\n")


def late_server(path: Path, *, listen_after: float, accept_after: float, backlog: int = 0) -> Callable[[], None]:
    """Bind now; listen after ``listen_after`` s (connects until then: ECONNREFUSED); accept from
    ``accept_after`` s (connects past the backlog until then: EAGAIN).  Returns a stopper."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    stop = threading.Event()

    def run() -> None:
        time.sleep(listen_after)
        server.listen(backlog)
        time.sleep(max(0.0, accept_after - listen_after))
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.settimeout(5)
            threading.Thread(target=answer_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def stopper() -> None:
        stop.set()
        thread.join(5)
        server.close()

    return stopper


def fill_backlog(path: Path) -> list[socket.socket]:
    """Connect until the accept queue is full, so the next connect fails with EAGAIN."""
    held: list[socket.socket] = []
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            return held
        held.append(sock)


def test_the_sync_client_waits_for_a_daemon_that_is_about_to_listen(short_tmp: Path) -> None:
    path = short_tmp / "late.sock"
    stop = late_server(path, listen_after=0.3, accept_after=0.3)
    try:
        with MemoryClient(str(path), user_id="u", timeout=5) as client:
            assert client.health() == {"status": "ok"}
    finally:
        stop()


def test_the_sync_client_retries_a_full_accept_queue(short_tmp: Path) -> None:
    path = short_tmp / "busy.sock"
    stop = late_server(path, listen_after=0.0, accept_after=0.5)
    time.sleep(0.1)
    held = fill_backlog(path)
    try:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.setblocking(False)
        with pytest.raises(BlockingIOError) as full:
            probe.connect(str(path))
        probe.close()
        assert full.value.errno == errno.EAGAIN
        with MemoryClient(str(path), user_id="u", timeout=5) as client:
            assert client.health() == {"status": "ok"}
    finally:
        for sock in held:
            sock.close()
        stop()


def test_no_daemon_at_all_is_still_reported_promptly(short_tmp: Path) -> None:
    path = short_tmp / "dead.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a socket file nobody listens on
    started = time.monotonic()
    with pytest.raises(DaemonUnavailable, match="refused"):
        MemoryClient(str(path), user_id="u", timeout=10).health()
    assert time.monotonic() - started < 5  # the refused window, not the whole timeout
    stale.close()


async def test_the_trio_client_waits_for_a_daemon_that_is_about_to_listen(short_tmp: Path) -> None:
    path = short_tmp / "late.sock"
    stop = late_server(path, listen_after=0.3, accept_after=0.3)
    try:
        async with AsyncMemoryClient(str(path), user_id="u", timeout=5) as client:
            assert await client.health() == {"status": "ok"}
    finally:
        stop()


async def test_the_trio_client_retries_a_full_accept_queue(short_tmp: Path) -> None:
    path = short_tmp / "busy.sock"
    stop = late_server(path, listen_after=0.0, accept_after=0.5)
    await trio.sleep(0.1)
    held = fill_backlog(path)
    try:
        # trio.open_unix_socket took EAGAIN for "in progress" and handed back an unconnected
        # socket: the call then failed with ConnectionLost ("broke twice").
        async with AsyncMemoryClient(str(path), user_id="u", timeout=5) as client:
            assert await client.health() == {"status": "ok"}
    finally:
        for sock in held:
            sock.close()
        stop()


@pytest.mark.parametrize("backlog", [None, 4])
def test_three_hundred_clients_connecting_at_once_all_get_answers(daemon_process: Any, backlog: int | None) -> None:
    """With the default backlog the queue holds the burst; with a tiny one, the clients' retries do."""
    env = {} if backlog is None else {"MEMORYD_LIMITS_LISTEN_BACKLOG": str(backlog)}
    daemon = daemon_process(env=env).start()
    path = str(daemon.socket)
    failures: list[BaseException] = []
    start = threading.Barrier(BURST // 2)

    def sync_client() -> None:
        try:
            start.wait(10)
            with MemoryClient(path, user_id="u", timeout=20) as client:
                assert client.health()["status"] == "ok"
        except BaseException as exc:  # noqa: BLE001 - collected and reported below
            failures.append(exc)

    threads = [threading.Thread(target=sync_client) for _ in range(BURST // 2)]
    for thread in threads:
        thread.start()

    async def trio_clients() -> None:
        async def one() -> None:
            try:
                async with AsyncMemoryClient(path, user_id="u", timeout=20) as client:
                    assert (await client.health())["status"] == "ok"
            except BaseException as exc:  # noqa: BLE001
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(BURST // 2):
                nursery.start_soon(one)

    trio.run(trio_clients)
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert daemon.stop() == 0
