"""sd_notify(3) without libsystemd: one AF_UNIX datagram of ``KEY=VALUE`` lines to $NOTIFY_SOCKET.

systemd learns who sent a message from the kernel (SCM_CREDENTIALS), so the protocol needs
nothing else.  Every method is a no-op when the daemon was not started by systemd.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias

import trio

from memoryd.log import fields

log = logging.getLogger("memoryd.notify")

#: How often STATUS= is refreshed while serving.
STATUS_INTERVAL_SECONDS = 30.0
#: A full notify socket must not hold up start-up or shutdown for long.
SEND_TIMEOUT_SECONDS = 1.0

#: Produces the one-line STATUS= text (counts, backlog).
Describe: TypeAlias = Callable[[], Awaitable[str]]


class Notifier:
    """Talks to the service manager; ``Notifier(None)`` (or no $NOTIFY_SOCKET) does nothing."""

    def __init__(
        self,
        address: str | None,
        *,
        watchdog_usec: int | None = None,
        status_interval: float = STATUS_INTERVAL_SECONDS,
    ) -> None:
        """``address`` as in $NOTIFY_SOCKET: a path, or ``@name`` for the abstract namespace."""
        self.address = _socket_address(address) if address else None
        self.status_interval = status_interval
        # systemd wants a ping at least every WATCHDOG_USEC; half of it leaves room for a slow tick.
        self.watchdog_interval = watchdog_usec / 2_000_000 if watchdog_usec and self.address else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET") or None
        if address is not None and not address.startswith(("/", "@")):
            # e.g. systemd 254's "vsock:CID:PORT": a VM's manager, not something we run under.
            log.warning("notify.unsupported_address", extra=fields(address=address))
            address = None
        return cls(address, watchdog_usec=_watchdog_usec(env))

    @property
    def enabled(self) -> bool:
        return self.address is not None

    async def send(self, *assignments: str) -> bool:
        """Send ``KEY=VALUE`` assignments as one datagram; False if it could not be delivered."""
        if self.address is None:
            return False
        payload = "\n".join(assignments).encode()
        # A fresh socket per message, like libsystemd: survives a service manager re-exec.
        with trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            with trio.move_on_after(SEND_TIMEOUT_SECONDS):
                try:
                    # Connected, so a full receive queue makes send() wait instead of spin.
                    await sock.connect(self.address)
                    await sock.send(payload)
                    return True
                except OSError as exc:
                    log.warning("notify.failed", extra=fields(error=str(exc)))
                    return False
            log.warning("notify.timeout", extra=fields(seconds=SEND_TIMEOUT_SECONDS))
            return False

    async def ready(self, describe: Describe) -> None:
        if self.enabled:
            await self.send("READY=1", _status(await _describe_safely(describe)))

    async def status(self, status: str) -> None:
        await self.send(_status(status))

    async def failed(self, reason: str, errno: int | None = None) -> None:
        """Start-up failed: ``systemctl status`` shows the reason next to the exit status."""
        assignments = [_status(f"failed: {reason}")]
        if errno:
            assignments.append(f"ERRNO={errno}")
        await self.send(*assignments)

    async def stopping(self) -> None:
        await self.send("STOPPING=1", _status("stopping"))

    async def run_watchdog(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Ping WATCHDOG=1 from the event loop until cancelled: a wedged loop stops the pings."""
        task_status.started()
        if self.watchdog_interval is None:
            return
        log.info("notify.watchdog", extra=fields(interval_seconds=self.watchdog_interval))
        while True:
            await self.send("WATCHDOG=1")
            await trio.sleep(self.watchdog_interval)

    async def run_status(
        self, describe: Describe, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Refresh STATUS= every ``status_interval`` seconds with ``await describe()`` until cancelled."""
        task_status.started()
        if not self.enabled:
            return
        while True:
            await trio.sleep(self.status_interval)
            await self.status(await _describe_safely(describe))


async def _describe_safely(describe: Describe) -> str:
    # Status is for the operator's eyes: a failing query must never take the daemon down.
    try:
        return await describe()
    except Exception as exc:
        log.warning("notify.status_failed", exc_info=True)
        return f"serving (status unavailable: {type(exc).__name__})"


def _socket_address(address: str) -> str:
    # "@name" is the abstract namespace: a leading NUL byte on the wire.
    return "\0" + address[1:] if address.startswith("@") else address


def _status(text: str) -> str:
    # One line: a newline would start a new (unintended) assignment.
    return "STATUS=" + " ".join(text.split())


def _watchdog_usec(env: Mapping[str, str]) -> int | None:
    """$WATCHDOG_USEC when the watchdog is meant for this process (sd_watchdog_enabled(3))."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid is not None and pid != str(os.getpid()):
        return None  # set for our parent or a wrapper, not for us
    return usec
