"""Connecting during a burst, for both drivers: which connect errors are worth another try, and when.

EAGAIN on an AF_UNIX connect means the daemon's accept queue is full (hundreds of clients
connecting at once): the daemon is there and will get to us.  ECONNREFUSED means the socket file
is there but nobody listens: a daemon restarting, or none at all, so it is retried only briefly.
Waits double from a few milliseconds, with jitter so a crowd does not retry in step.
"""

from __future__ import annotations

import errno
import random
import socket
from typing import Optional

#: How long an EAGAIN (accept queue full) is retried when the caller set no timeout.
BUSY_RETRY_SECONDS = 30.0
#: How long ECONNREFUSED (no listener) is retried: long enough for a restart, short enough that
#: "no daemon" is still reported promptly.
REFUSED_RETRY_SECONDS = 1.0
FIRST_DELAY = 0.005
MAX_DELAY = 0.25


class ConnectRetry:
    """The retry schedule of one connect attempt (a fresh one per connect)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self._delay = FIRST_DELAY

    def next_delay(self, exc: OSError, now: float, deadline: Optional[float]) -> Optional[float]:
        """Seconds to wait before connecting again, or None: give up and report ``exc``."""
        if exc.errno == errno.EAGAIN:
            window = BUSY_RETRY_SECONDS
        elif exc.errno == errno.ECONNREFUSED:
            window = REFUSED_RETRY_SECONDS
        else:
            return None
        delay = random.uniform(0.5, 1.0) * self._delay
        self._delay = min(self._delay * 2, MAX_DELAY)
        give_up_at = self.started + window
        if deadline is not None:
            give_up_at = min(give_up_at, deadline)
        if now + delay >= give_up_at:
            return None
        return delay


def unix_socket() -> socket.socket:
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
