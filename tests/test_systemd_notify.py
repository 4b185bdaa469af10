"""sd_notify: real datagram sockets stand in for systemd's $NOTIFY_SOCKET."""

from __future__ import annotations

import os
import signal
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from memoryd.server.daemon import Daemon
from memoryd.server.notify import Notifier
from tests.conftest import make_config
from tests.wire import NdjsonPeer

_UCRED = struct.Struct("3i")


class NotifyListener:
    """A bound datagram socket that records who sent what, like systemd's notify socket."""

    def __init__(self, address: str) -> None:
        self.address = address  # as written in $NOTIFY_SOCKET
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        # The kernel then attaches the sender's pid/uid/gid, which systemd checks (NotifyAccess=main).
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.settimeout(20)
        self.trio_sock: trio.socket.SocketType | None = None

    def receive(self) -> tuple[dict[str, str], int]:
        """The next message as {KEY: VALUE}, and the sender's pid."""
        data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(_UCRED.size))
        pid = next(
            _UCRED.unpack(payload[: _UCRED.size])[0]
            for level, kind, payload in ancillary
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
        )
        return dict(line.split("=", 1) for line in data.decode().split("\n")), pid

    def receive_until(self, key: str) -> list[dict[str, str]]:
        """Messages up to and including the first one that sets ``key``."""
        seen = []
        while True:
            message, _ = self.receive()
            seen.append(message)
            if key in message:
                return seen

    def waiting(self) -> dict[str, str]:
        """The message already queued, without waiting (BlockingIOError when there is none)."""
        self.sock.settimeout(0)
        try:
            return self.receive()[0]
        finally:
            self.sock.settimeout(20)

    async def areceive(self) -> dict[str, str]:
        if self.trio_sock is None:
            self.trio_sock = trio.socket.from_stdlib_socket(self.sock)  # async use only from here on
        data = await self.trio_sock.recv(4096)
        return dict(line.split("=", 1) for line in data.decode().split("\n"))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def abstract_listener() -> Iterator[NotifyListener]:
    listener = NotifyListener(f"@memoryd-test-{uuid.uuid4().hex}")
    yield listener
    listener.close()


async def _describe() -> str:
    return "serving; memories 3"


async def test_without_notify_socket_every_call_is_a_no_op() -> None:
    notifier = Notifier.from_environ({})
    assert not notifier.enabled and notifier.watchdog_interval is None
    assert await notifier.send("READY=1") is False
    await notifier.ready(_describe)
    await notifier.stopping()


async def test_ready_and_status_arrive_as_one_datagram_on_an_abstract_socket(
    abstract_listener: NotifyListener,
) -> None:
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": abstract_listener.address})
    await notifier.ready(_describe)
    assert await abstract_listener.areceive() == {"READY": "1", "STATUS": "serving; memories 3"}


async def test_a_path_notify_socket_works_too(short_tmp: Path) -> None:
    listener = NotifyListener(str(short_tmp / "notify"))
    try:
        await Notifier.from_environ({"NOTIFY_SOCKET": listener.address}).stopping()
        assert await listener.areceive() == {"STOPPING": "1", "STATUS": "stopping"}
    finally:
        listener.close()


async def test_status_text_is_kept_to_one_line(abstract_listener: NotifyListener) -> None:
    await Notifier(abstract_listener.address).status("line one\nREADY=1\tmore")
    assert await abstract_listener.areceive() == {"STATUS": "line one READY=1 more"}


async def test_ready_is_sent_even_when_the_status_query_fails(abstract_listener: NotifyListener) -> None:
    async def broken() -> str:
        raise RuntimeError("database is locked")

    await Notifier(abstract_listener.address).ready(broken)
    message = await abstract_listener.areceive()
    assert message["READY"] == "1" and "status unavailable" in message["STATUS"]


async def test_a_missing_notify_socket_is_reported_not_raised(short_tmp: Path) -> None:
    assert await Notifier(str(short_tmp / "nobody-listens")).send("READY=1") is False


@pytest.mark.parametrize(
    ("environ", "interval"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),  # for another process
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_pings_at_half_of_watchdog_usec_when_meant_for_us(
    environ: dict[str, str], interval: float | None
) -> None:
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": "@memoryd-unused", **environ})
    assert notifier.watchdog_interval == interval


def test_an_unsupported_notify_address_disables_notifications() -> None:
    assert not Notifier.from_environ({"NOTIFY_SOCKET": "vsock:2:1234"}).enabled


async def test_the_watchdog_keeps_pinging_until_cancelled(abstract_listener: NotifyListener) -> None:
    notifier = Notifier(abstract_listener.address, watchdog_usec=20_000)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(notifier.run_watchdog)
            for _ in range(3):
                assert await abstract_listener.areceive() == {"WATCHDOG": "1"}
            nursery.cancel_scope.cancel()


async def test_status_follows_the_store_while_serving(short_tmp: Path, abstract_listener: NotifyListener) -> None:
    notifier = Notifier(abstract_listener.address, status_interval=0.05)
    daemon = Daemon(make_config(short_tmp), notifier=notifier)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(20):
            path = await nursery.start(daemon.run)
            ready = await abstract_listener.areceive()
            assert ready["READY"] == "1"
            assert ready["STATUS"].startswith("serving; memories 0, users 0, jobs pending 0")
            peer = await NdjsonPeer.connect(path)
            added = await peer.call("memory.add", {"user_id": "alice", "content": "likes green tea"})
            assert "result" in added
            while "memories 1, users 1" not in (await abstract_listener.areceive()).get("STATUS", ""):
                pass
            await peer.aclose()
            daemon.request_stop()
            while (await abstract_listener.areceive()).get("STOPPING") != "1":
                pass


async def test_ready_is_sent_before_the_first_client_is_answered(
    short_tmp: Path, abstract_listener: NotifyListener
) -> None:
    # Under socket activation a client's answer must find the unit active already: systemctl
    # reported "activating" with no status to a client that had been served.
    daemon = Daemon(make_config(short_tmp), notifier=Notifier(abstract_listener.address))
    async with trio.open_nursery() as nursery:
        with trio.fail_after(20):
            nursery.start_soon(daemon.run)
            while not daemon.config.socket_path.exists():  # bound: the call waits in the listen queue
                await trio.sleep(0.01)
            peer = await NdjsonPeer.connect(daemon.config.socket_path)
            assert "result" in await peer.call("system.health", {})
            assert abstract_listener.waiting()["READY"] == "1"  # already delivered
            await peer.aclose()
            daemon.request_stop()


def test_the_daemon_process_notifies_ready_watchdog_and_stopping(daemon_process: Any) -> None:
    listener = NotifyListener(f"@memoryd-test-{uuid.uuid4().hex}")
    try:
        # 100 ms watchdog: pings every 50 ms.
        process = daemon_process(env={"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "100000"})
        process.start(wait=False)
        before_ready = listener.receive_until("READY")
        # The watchdog runs from the start: pings may precede READY=1, nothing else does.
        assert all(message == {"WATCHDOG": "1"} for message in before_ready[:-1])
        assert before_ready[-1]["STATUS"].startswith("serving; memories 0")
        assert process.accepts_connections()  # READY=1 means clients are served
        pings = 0
        while pings < 3:
            message, sender = listener.receive()
            assert sender == process.proc.pid  # what systemd's NotifyAccess=main checks
            pings += message == {"WATCHDOG": "1"}
        process.proc.send_signal(signal.SIGTERM)
        listener.receive_until("STOPPING")
        assert process.proc.wait(30) == 0
    finally:
        listener.close()
