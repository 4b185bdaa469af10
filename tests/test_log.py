"""Log lines: repeated warnings and errors are rate-limited per kind, with a count of the dropped."""

from __future__ import annotations

import io
import logging

from memoryd.log import RepeatLimiter, fields, setup_logging


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limited_logger(name: str, clock: FakeClock) -> tuple[logging.Logger, list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    handler.addFilter(RepeatLimiter(burst=3, window=60.0, clock=clock))
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, records


def test_the_same_error_is_logged_burst_times_per_window_then_counted() -> None:
    clock = FakeClock()
    logger, records = limited_logger("memoryd.test.limit", clock)
    for connection in range(5000):
        try:
            raise RecursionError("deep")
        except RecursionError:
            logger.error("method %r failed on connection %d", "memory.list", connection, exc_info=True)
    assert len(records) == 3
    assert records[-1].fields == {"repeats_muted_seconds": 60.0}  # type: ignore[attr-defined]
    clock.now += 61
    logger.error(
        "method %r failed on connection %d", "memory.list", 1, exc_info=(RecursionError, RecursionError(), None)
    )
    assert len(records) == 4 and records[-1].fields == {"suppressed": 4997}  # type: ignore[attr-defined]


def test_other_kinds_and_info_lines_are_not_limited() -> None:
    clock = FakeClock()
    logger, records = limited_logger("memoryd.test.kinds", clock)
    for _ in range(10):
        logger.info("auth.refused", extra=fields(code="decode"))
        logger.warning("request.deadline")
        logger.warning("connection.send_stalled")
    assert sum(r.levelno == logging.INFO for r in records) == 10
    assert sum(r.getMessage() == "request.deadline" for r in records) == 3
    assert sum(r.getMessage() == "connection.send_stalled" for r in records) == 3


def test_the_daemon_log_handler_is_limited() -> None:
    stream = io.StringIO()
    setup_logging("info", "kv", stream)
    logger = logging.getLogger("memoryd.test.daemon")
    for _ in range(1000):
        logger.error("boom")
    assert 0 < stream.getvalue().count("event=boom") <= 10
