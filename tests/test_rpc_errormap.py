"""rpc_error_for: every MemorydError has a deliberate reply, unexpected errors are -32603 and logged."""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
from typing import Any

import msgspec
import pytest

import memoryd
from memoryd import errors
from memoryd.rpc.dispatch import CallContext, MethodTable
from memoryd.rpc.envelope import Request
from memoryd.rpc.errormap import ERROR_REPLIES, rpc_error_for


def _import_every_memoryd_module() -> None:
    # An error class defined anywhere in the package must be seen, not only those already imported.
    for module in pkgutil.walk_packages(memoryd.__path__, "memoryd."):
        if not module.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(module.name)


def _every_subclass(cls: type[Exception]) -> set[type[Exception]]:
    found: set[type[Exception]] = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _every_subclass(sub)
    return found


def test_every_memoryd_error_is_mapped_deliberately() -> None:
    _import_every_memoryd_module()
    # Classes the tests define for themselves (below) are not memoryd's.
    hierarchy = {cls for cls in _every_subclass(errors.MemorydError) if cls.__module__.startswith("memoryd.")}
    assert errors.StoreError in hierarchy and errors.InvalidParams in hierarchy  # the walk works
    # An RpcError is its own reply; every other class needs its own line in ERROR_REPLIES
    # (inheriting a parent's entry does not count: the choice must be made for each class).
    unmapped = {cls for cls in hierarchy if not issubclass(cls, errors.RpcError) and cls not in ERROR_REPLIES}
    assert not unmapped, f"add these to memoryd/rpc/errormap.py ERROR_REPLIES: {sorted(c.__name__ for c in unmapped)}"


def test_error_replies_has_no_stale_entries() -> None:
    for cls in ERROR_REPLIES:
        assert issubclass(cls, errors.MemorydError) and not issubclass(cls, errors.RpcError), cls


def test_every_rpc_error_class_is_its_own_reply() -> None:
    for cls in _every_subclass(errors.RpcError):
        error = cls("as raised", {"k": 1})
        assert rpc_error_for(error, "m", 1) is error


@pytest.mark.parametrize(
    ("exc", "code", "message", "data"),
    [
        (
            errors.StoreBusy(250),
            -32007,
            "Database is busy (locked by another process), retry later",
            {"busy_timeout_ms": 250},
        ),
        (
            errors.EmbedderError("openai at http://10.0.0.1:8080: HTTP 503"),
            -32007,
            "Embedding backend unavailable, retry later",
            {"backend": "embedder"},
        ),
        (
            errors.LlmUnavailable("ollama at http://10.0.0.1:11434: HTTP 503", 2.0),
            -32007,
            "LLM backend unavailable, retry later",
            {"backend": "llm"},
        ),
        (errors.LlmRefused("openai: HTTP 401"), -32603, "Internal error", None),
        (errors.LlmBadReply("never valid JSON"), -32603, "Internal error", None),
        (errors.StoreError("the store is closed"), -32603, "Internal error", None),
        (errors.EmbeddingModelMismatch("another model"), -32603, "Internal error", None),
        (errors.ConfigError("bad key"), -32603, "Internal error", None),
        (errors.StartupError("no socket"), -32603, "Internal error", None),
        (RuntimeError("a bug"), -32603, "Internal error", None),
        (KeyError("a bug"), -32603, "Internal error", None),
    ],
)
def test_internal_errors_become_these_replies(exc: Exception, code: int, message: str, data: Any) -> None:
    error = rpc_error_for(exc, "memory.add", 3)
    assert (error.code, error.message, error.data) == (code, message, data)


def test_an_error_alone_in_exception_groups_gets_its_own_reply() -> None:
    # A nursery in a handler wraps what its body raises: a full disk stays a full disk.
    full = errors.DiskFull("the disk is full: nothing was written")
    expected = rpc_error_for(full, "memory.add", 1)
    alone = rpc_error_for(ExceptionGroup("nursery", [ExceptionGroup("inner", [full])]), "memory.add", 1)
    assert (alone.code, alone.message, alone.data) == (expected.code, expected.message, expected.data)
    assert alone.code != -32603
    # Two different failures at once are no single reply's: an internal error.
    both = ExceptionGroup("nursery", [full, errors.StoreBusy(10)])
    assert rpc_error_for(both, "memory.add", 1).code == -32603


def test_the_same_failure_twice_in_exception_groups_gets_its_own_reply() -> None:
    # An overlapped search's two readers that both find the file damaged: one damaged file.
    first, second = errors.StoreCorrupt("damaged: first reader"), errors.StoreCorrupt("damaged: second")
    expected = rpc_error_for(first, "memory.search", 1)
    twice = rpc_error_for(ExceptionGroup("nursery", [first, ExceptionGroup("inner", [second])]), "memory.search", 1)
    assert (twice.code, twice.message, twice.data) == (expected.code, expected.message, expected.data)
    assert twice.code != -32603


def test_a_subclass_without_its_own_entry_still_gets_its_parents_reply() -> None:
    # The test above makes it a failure to ship one; at run time the nearest entry applies.
    class NewStoreProblem(errors.StoreBusy):
        pass

    assert rpc_error_for(NewStoreProblem(5), "m", 1).code == -32007


def test_every_internal_error_reply_is_logged_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd.rpc")
    for exc in (ValueError("secret content 4411"), errors.StoreError("disk I/O error")):
        caplog.clear()
        rpc_error_for(exc, "memory.add", 12)
        [record] = caplog.records
        assert record.levelno == logging.ERROR and record.exc_info is not None and record.exc_info[1] is exc
        assert record.getMessage() == "method 'memory.add' failed on connection 12"


def test_expected_errors_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="memoryd.rpc")
    for exc in (errors.StoreBusy(10), errors.EmbedderError("down"), errors.InvalidParams.for_field("x", "bad")):
        rpc_error_for(exc, "memory.add", 1)
    assert caplog.records == []


class _NoParams(msgspec.Struct):
    pass


async def test_a_store_error_raised_in_a_handler_is_answered_through_the_map() -> None:
    table = MethodTable()

    async def locked(params: _NoParams, ctx: CallContext) -> None:
        raise errors.StoreBusy(200)

    table.register("locked", _NoParams, locked)
    reply = await table.dispatch(Request(method="locked", params=None, id=4, is_notification=False), CallContext())
    assert reply is not None
    assert json.loads(reply) == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32007,
            "message": "Database is busy (locked by another process), retry later",
            "data": {"busy_timeout_ms": 200},
        },
        "id": 4,
    }
