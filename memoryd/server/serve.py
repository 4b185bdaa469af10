"""``memoryd serve``: the daemon under a service manager, until SIGTERM or SIGINT.

The socket systemd may hand over, the READY/STATUS/WATCHDOG messages, and the signals that
ask for a graceful stop; the daemon itself is ``daemon.Daemon``.
"""

from __future__ import annotations

import logging
import signal

import trio

from memoryd.config import Config
from memoryd.errors import StartupError
from memoryd.log import fields
from memoryd.server.activation import take_listen_socket
from memoryd.server.daemon import Daemon
from memoryd.server.head_start import HeadStart
from memoryd.server.notify import Notifier

log = logging.getLogger("memoryd.daemon")


async def run_until_signalled(
    config: Config, *, accept_empty_db: bool = False, head_start: HeadStart | None = None
) -> None:
    """``memoryd serve``: run until SIGTERM or SIGINT, then shut down gracefully."""
    notifier = Notifier.from_environ()
    daemon = Daemon(
        config,
        listen_socket=take_listen_socket(),
        notifier=notifier,
        accept_empty_db=accept_empty_db,
        head_start=head_start,
    )
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

        async def watch_signals() -> None:
            async for signum in signals:
                log.info("daemon.signal", extra=fields(signal=signal.Signals(signum).name))
                daemon.request_stop()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_signals)
            # For the whole run, start-up included: the pings prove the loop is alive, not ready.
            nursery.start_soon(notifier.run_watchdog)
            try:
                await daemon.run()
            except StartupError as exc:
                await notifier.failed(str(exc), getattr(exc, "errno", None))
                raise
            nursery.cancel_scope.cancel()
