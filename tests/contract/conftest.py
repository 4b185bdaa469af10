"""The contract suite's fixtures: every test runs once per backend, through the interfaces only.

A backend joins the suite with one entry in ``BACKENDS``: a function that opens a fresh, empty
store of that engine on the given clock (the suite moves time for expiry, leases, backoff and
retention).  Nothing else here names an engine; the tests see a ``store.interfaces.Backend``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memoryd.store.interfaces import Backend
from tests.contract.helpers import DIM
from tests.store_helpers import Clock


def open_sqlite(tmp_path: Path, clock: Clock) -> Backend:
    from memoryd.store.sqlite import Store

    return Store(tmp_path / "memory.db", readers=2, clock=clock)


def open_postgres(tmp_path: Path, clock: Clock) -> Backend:
    """A fresh schema in the session's PostgreSQL (skipped without the test extra)."""
    from tests.postgres_server import shared

    server = shared()
    from memoryd.store.postgres import PostgresStore

    return PostgresStore(server.fresh_database(), pool_size=4, clock=clock, node=f"test-{tmp_path.name}")


#: name -> opens a fresh store of that backend on ``clock``.
BACKENDS: dict[str, Callable[[Path, Clock], Backend]] = {"sqlite": open_sqlite, "postgres": open_postgres}


@pytest.fixture(params=sorted(BACKENDS))
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(backend_name: str, tmp_path: Path, clock: Clock) -> Iterator[Backend]:
    """A fresh store of each backend, with a vector space configured."""
    store = BACKENDS[backend_name](tmp_path, clock)
    store.configure_vector_space("contract:test", DIM)
    with store:
        yield store


@pytest.fixture
def another(backend_name: str, tmp_path: Path, clock: Clock) -> Iterator[Backend]:
    """A second, empty store of the same backend (an import's target)."""
    (tmp_path / "another").mkdir()
    store = BACKENDS[backend_name](tmp_path / "another", clock)
    store.configure_vector_space("contract:test", DIM)
    with store:
        yield store
